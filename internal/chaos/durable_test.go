//go:build unix

package chaos

import (
	"bufio"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRestartAfterSIGKILLReadsOnlyTheTail: a stateful process is SIGKILLed
// some time after its last commit and restarted on the same state
// directory. With the local stores' write-ahead log synced on an interval
// (state.sync_interval, default 1s) the stores and their checkpoints
// survive the kill, so the restart restores nothing: every task's restore
// reads from its checkpoint, which is the changelog's end. With the timer
// off (the behaviour before it existed) the kill takes the unsynced tail of
// the log and the restart reads those commits back from the changelog —
// which proves the first case is the sync's doing. Both runs log the
// records restored and the restore time (the figures of RATIONALE.md).
func TestRestartAfterSIGKILLReadsOnlyTheTail(t *testing.T) {
	for _, c := range []struct {
		name string
		sync time.Duration
	}{{"synced every 1s", time.Second}, {"never synced", -1}} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			h := newHarness(t, exactlyOnce, 1, 150*time.Second, withStateSync(c.sync), withTxnTimeout(5*time.Second))
			m := h.members[0]
			h.startGroup(1)
			// Spread over many commit points (50 ms apart), so the
			// changelog holds thousands of records: one per dirty key and
			// commit.
			h.produceSteadily(20000, 8*time.Second, 0).finish(h, false, 60*time.Second)
			h.waitDrained(90 * time.Second)
			// Past the sync interval (and past what any commit still in
			// flight needs), so the synced run has nothing left unsynced.
			h.sleep(5 * c.sync.Abs())
			m.kill()
			p := m.start()
			// Each task restores two stores: the counter's "counts" and
			// the processor's time store (stream time, timers).
			restored, slowest := waitRestores(t, h, p, 2*inputPartitions)
			t.Logf("%s: after SIGKILL the restart restored %d changelog records (slowest task restore %v)", c.name, restored, slowest)
			if c.sync > 0 && restored != 0 {
				t.Errorf("restart after SIGKILL restored %d records, want 0: the stores' checkpoints did not survive the kill although the last commit was %v before it and state.sync_interval is %v",
					restored, 5*c.sync, c.sync)
			}
			// Without the sync, what a SIGKILL takes is the part of Pebble's
			// last log block not yet written to the file, and that is empty
			// when the last commit's batch happened to fill a block (the
			// flusher then writes the full block and the start of the next).
			// So a run that loses nothing proves nothing either way: kill
			// again after a few more commits, a bounded number of times.
			for attempt := 2; c.sync < 0 && restored == 0 && attempt <= 4; attempt++ {
				h.produceSteadily(1000, time.Second, 0).finish(h, false, 30*time.Second)
				h.waitDrained(60 * time.Second)
				m.kill()
				p = m.start()
				restored, slowest = waitRestores(t, h, p, 2*inputPartitions)
				t.Logf("%s, kill %d: the restart restored %d changelog records (slowest task restore %v)", c.name, attempt, restored, slowest)
			}
			if c.sync < 0 && restored == 0 {
				t.Errorf("with state.sync_interval off no restart in 4 SIGKILLs restored anything: no kill lost a commit, so this test cannot tell the sync's effect")
			}
			h.finish(true)
		})
	}
}

var restoreDoneRE = regexp.MustCompile(`msg="restore: complete".* restored=(\d+) elapsed=(\S+)`)

// waitRestores waits until p logged n completed restores (one per task and
// store) and returns the records they restored and the longest one.
func waitRestores(t *testing.T, h *harness, p *proc, n int) (restored int, slowest time.Duration) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		restored, slowest = 0, 0
		done := 0
		f, err := os.Open(p.m.logPath)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Seek(p.logFrom, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			mm := restoreDoneRE.FindStringSubmatch(sc.Text())
			if mm == nil {
				continue
			}
			done++
			r, _ := strconv.Atoi(mm[1])
			restored += r
			if d, err := time.ParseDuration(mm[2]); err == nil && d > slowest {
				slowest = d
			}
		}
		f.Close()
		if done >= n {
			return restored, slowest
		}
		h.failOnUnexpectedExits()
		if time.Now().After(deadline) {
			t.Fatalf("%s logged %d of %d completed restores within 60s; log tail:\n%s", p, done, n, p.logTail(30))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
