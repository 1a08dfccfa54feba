//go:build unix

package chaos

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	exactlyOnce = "exactly_once"
	atLeastOnce = "at_least_once"
)

// TestCrashSIGKILL: three processes of one exactly_once app while input
// is produced steadily; every 2-4 s one of them, at random, is SIGKILLed —
// mid-transaction, with the others running — and restarted on the same
// state directory, so it reopens its local store and checkpoint as a
// crashed process would. After six kills the input stops, the group
// drains, every process must stop cleanly on SIGTERM, and the committed
// output must be exactly once with every count equal to the reference.
//
// On kfake a kill waits for a stable group (see waitStableBeforeKill); on
// the real broker kills also land in the middle of rebalances.
func TestCrashSIGKILL(t *testing.T) {
	h := newHarness(t, exactlyOnce, 3, 150*time.Second)
	h.startGroup(3)

	const rate, kills = 120, 6
	prod := h.produceSteadily(0, 0, rate)
	h.killChurn(kills)
	h.sleep(time.Second) // the last restart too sees input
	prod.finish(h, true, 30*time.Second)
	h.waitDrained(90 * time.Second)
	h.finish(true)
	h.checkLocalStores()
}

// TestCrashSIGKILLWithStandbys is TestCrashSIGKILL with
// state.standby_replicas: 1: every process also keeps warm
// copies of other processes' tasks and catches them up while the kills
// move tasks around, so a moved task often starts on a copy. The output
// must still be exactly once, and checkLocalStores holds every store of
// every process, the copies included, to its changelog up to its
// checkpoint: a copy whose checkpoint ran ahead of its data (the Kafka
// Streams bug of seed kafka-streams-wrong-checkpoint-after-revive) fails
// it.
func TestCrashSIGKILLWithStandbys(t *testing.T) {
	h := newHarness(t, exactlyOnce, 3, 150*time.Second, withStandbys(1))
	h.startGroup(3)

	const rate, kills = 120, 6
	prod := h.produceSteadily(0, 0, rate)
	h.killChurn(kills)
	h.sleep(time.Second)
	prod.finish(h, true, 30*time.Second)
	h.waitDrained(90 * time.Second)
	h.finish(true)
	h.checkLocalStores()
}

// killChurn SIGKILLs a running member, chosen at random, every 2-4 s and
// restarts it on its state directory, kills times (on kfake each kill waits
// for a stable group; see waitStableBeforeKill).
func (h *harness) killChurn(kills int) {
	t := h.t
	t.Helper()
	for i := range kills {
		h.sleep(h.jitter(2*time.Second, 4*time.Second))
		if !h.waitStableBeforeKill(45 * time.Second) {
			g, err := h.describeGroup()
			t.Fatalf("kfake: the group did not become stable within 45s after the last kill: %s (err %v)", g, err)
		}
		h.restartDead()
		var alive []*member
		for _, m := range h.members {
			if m.running() {
				alive = append(alive, m)
			}
		}
		if len(alive) == 0 {
			t.Fatal("no process left to kill")
		}
		m := alive[h.rng.IntN(len(alive))]
		t.Logf("kill %d/%d at %v: SIGKILL %s, restart on the same state dir", i+1, kills, time.Since(h.started).Round(time.Millisecond), m.cur)
		m.kill()
		m.start()
	}
}

// TestFencingSIGSTOP: two processes; one is SIGSTOPped while it owns
// partitions and holds an open transaction (seen on the broker), and stays
// stopped past its session timeout and its transaction timeout, until the
// other process owns every partition and has committed past where the
// stopped one was. More input is produced, then the stopped process is
// SIGCONTed: it must not commit anything that duplicates — it finds itself
// fenced or out of the group and either carries on (rejoining) or exits
// non-zero; either is accepted and logged. The output must be exactly once.
func TestFencingSIGSTOP(t *testing.T) {
	h := newHarness(t, exactlyOnce, 2, 150*time.Second)
	h.startGroup(2)
	prod := h.produceSteadily(0, 0, 150)
	// Let both process for a while.
	h.sleep(2 * time.Second)

	victim, survivor := h.members[0], h.members[1]
	vp := victim.cur
	var stoppedTxn string
	var stoppedAt time.Time
	for attempt := 1; attempt <= 8 && stoppedTxn == ""; attempt++ {
		h.failOnUnexpectedExits()
		// A burst, then stop while its transaction is open: the victim
		// holds outputs that were produced but not committed.
		h.produceNow(200)
		h.sleep(h.jitter(5*time.Millisecond, 40*time.Millisecond))
		vp.signal(syscall.SIGSTOP)
		stoppedAt = time.Now()
		first, err := h.openTxns()
		if err == nil {
			h.sleep(700 * time.Millisecond)
			var second map[string]kadmTxn
			second, err = h.openTxns()
			for id, d := range first {
				// The survivor commits every 50 ms; a transaction open
				// across both looks is the stopped process's.
				if d2, ok := second[id]; ok && d2.StartTimestamp == d.StartTimestamp {
					stoppedTxn = id
				}
			}
		}
		if err != nil {
			t.Logf("attempt %d: listing transactions: %v", attempt, err)
		}
		if stoppedTxn == "" {
			t.Logf("attempt %d: %s stopped with no transaction of its own open on %s; SIGCONT and try again", attempt, vp, h.out)
			vp.signal(syscall.SIGCONT)
			h.sleep(500 * time.Millisecond)
		}
	}
	if stoppedTxn == "" {
		t.Errorf("never caught %s with an open transaction in 8 attempts: is the host transactional under exactly_once? (open transactions on %s: %s)",
			vp, h.out, h.openTxnsString())
		vp.signal(syscall.SIGSTOP)
		stoppedAt = time.Now()
	} else {
		t.Logf("%s SIGSTOPped holding open transaction %s", vp, stoppedTxn)
	}
	before, err := h.committed()
	if err != nil {
		t.Fatal(err)
	}
	g, err := h.describeGroup()
	if err != nil {
		t.Fatal(err)
	}
	var victimID string
	var victimParts []int32
	for _, m := range g.members {
		if m.clientID == victim.name {
			victimID, victimParts = m.memberID, m.partitions
		}
	}
	if victimID == "" || len(victimParts) == 0 {
		t.Fatalf("%s owns no partitions when stopped: %s", vp, g)
	}
	t.Logf("stopped member %s… owned partitions %v (committed offsets then: %v)", prefix(victimID, 12), victimParts, before)

	// Its session expires and the survivor takes everything over.
	start := time.Now()
	for {
		h.checkDeadline("waiting for the survivor to take over")
		h.failOnUnexpectedExits()
		g, err := h.describeGroup()
		if err == nil && g.state == "Stable" && len(g.members) == 1 && g.members[0].clientID == survivor.name &&
			len(g.members[0].partitions) == inputPartitions {
			t.Logf("survivor owns every partition %v after SIGSTOP: %s", time.Since(stoppedAt).Round(time.Millisecond), g)
			break
		}
		if time.Since(start) > h.sessTimeout+40*time.Second {
			t.Fatalf("the survivor did not take over within %v of SIGSTOP: group %s (err %v)", time.Since(stoppedAt).Round(time.Second), g, err)
		}
		h.sleep(200 * time.Millisecond)
	}
	for {
		h.checkDeadline("waiting for the survivor to commit on the stopped member's partitions")
		now, err := h.committed()
		advanced := err == nil
		for _, p := range victimParts {
			advanced = advanced && now[p] > before[p]
		}
		if advanced {
			t.Logf("survivor committed past the stopped member on %v after %v: %v", victimParts, time.Since(stoppedAt).Round(time.Millisecond), now)
			break
		}
		if time.Since(start) > h.sessTimeout+60*time.Second {
			t.Fatalf("the survivor committed nothing on %v within %v of SIGSTOP: before %v, now %v (err %v); open transactions: %s",
				victimParts, time.Since(stoppedAt).Round(time.Second), before, now, err, h.openTxnsString())
		}
		h.sleep(200 * time.Millisecond)
	}

	// More input while the zombie is still frozen, then wake it.
	h.produceNow(300)
	vp.allowExit = true
	contLog := logSize(victim.logPath)
	vp.signal(syscall.SIGCONT)
	contAt := time.Now()
	t.Logf("SIGCONT %s %v after SIGSTOP", vp, contAt.Sub(stoppedAt).Round(time.Millisecond))
	outcome := ""
	for outcome == "" {
		h.checkDeadline("watching the resumed process")
		survivorExited := survivor.cur.exited()
		if survivorExited {
			t.Fatalf("the survivor %s exited with %s after the zombie resumed; log tail:\n%s", survivor.cur, survivor.cur.status(), survivor.cur.logTail(30))
		}
		if vp.exited() {
			outcome = fmt.Sprintf("exited with %s %v after SIGCONT", vp.status(), vp.end.Sub(contAt).Round(time.Millisecond))
			if vp.exitCode() == 0 {
				t.Errorf("%s exited 0 after being fenced, want a non-zero exit (a clean exit says nothing was wrong); log tail:\n%s", vp, vp.logTail(30))
			}
			break
		}
		g, err := h.describeGroup()
		if err == nil && g.state == "Stable" && len(g.members) == 2 {
			owned := 0
			for _, m := range g.members {
				if m.clientID == victim.name && m.memberID != victimID {
					owned = len(m.partitions)
				}
			}
			if owned > 0 {
				outcome = fmt.Sprintf("carried on: rejoined as a new member and owns %d partitions %v after SIGCONT", owned, time.Since(contAt).Round(time.Millisecond))
				break
			}
		}
		if time.Since(contAt) > 45*time.Second {
			// A hung zombie holds nothing (its transaction has timed out
			// and its partitions are gone) but never recovers either.
			t.Errorf("%s neither exited nor rejoined the group within 45s of SIGCONT: it hangs (group %s, err %v); "+
				"its goroutines are dumped into its log by SIGQUIT; the tail:\n%s", vp, g, err, vp.logTail(15))
			vp.dump()
			outcome = "hung (dumped with SIGQUIT after 45s)"
			break
		}
		h.sleep(200 * time.Millisecond)
	}
	t.Logf("the fenced process %s: %s; its warnings and errors after SIGCONT: %s", vp, outcome, zombieNotes(victim.logPath, contLog))

	prod.finish(h, true, 30*time.Second)
	h.waitDrained(60 * time.Second)
	h.finish(true)
}

// zombieNotes picks the warnings and errors a process logged from offset
// on (after it was woken up), to say how it noticed.
func zombieNotes(path string, offset int64) string {
	data, err := os.ReadFile(path)
	if err != nil || offset > int64(len(data)) {
		return "(no log)"
	}
	var notes []string
	for _, l := range strings.Split(string(data[offset:]), "\n") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") || strings.HasPrefix(l, "wasmstream:") {
			notes = append(notes, l)
		}
	}
	if len(notes) > 8 {
		notes = append(notes[:4], append([]string{"..."}, notes[len(notes)-4:]...)...)
	}
	if len(notes) == 0 {
		return "(none)"
	}
	return "\n    " + strings.Join(notes, "\n    ")
}

func logSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// TestRebalanceStorm: three member slots joining and leaving about every
// second for 16 s while input is produced: a running member is stopped
// (SIGTERM, a clean leave, two times in three; SIGKILL otherwise) or a
// stopped one started, always keeping one running. Then every slot is
// started, the input drains, all stop cleanly. Under exactly_once the
// output is exactly once and every count is the reference; under
// at_least_once every id is there at least once and no count is below the
// reference.
func TestRebalanceStorm(t *testing.T) {
	for _, g := range []string{exactlyOnce, atLeastOnce} {
		t.Run(g, func(t *testing.T) { storm(t, g) })
	}
}

func storm(t *testing.T, guarantee string) {
	h := newHarness(t, guarantee, 3, 120*time.Second)
	h.startGroup(3)

	const total, over = 2000, 16 * time.Second
	prod := h.produceSteadily(total, over, 0)
	end := time.Now().Add(over)
	actions := 0
	for time.Now().Before(end) {
		h.sleep(h.jitter(700*time.Millisecond, 1300*time.Millisecond))
		h.judgeStops(false)
		h.restartDead()
		alive := 0
		for _, m := range h.members {
			if m.running() {
				alive++
			}
		}
		m := h.members[h.rng.IntN(len(h.members))]
		switch {
		case m.running() && alive > 1:
			// kfake: a SIGKILL only on a stable group (see
			// waitStableBeforeKill); otherwise it becomes a SIGTERM.
			kill := h.rng.IntN(3) == 0 && (h.b.Real() || h.stableNow())
			switch {
			case kill:
				t.Logf("storm %v: SIGKILL %s", time.Since(h.started).Round(time.Millisecond), m.cur)
				m.kill()
			case m.cur.up():
				t.Logf("storm %v: SIGTERM %s", time.Since(h.started).Round(time.Millisecond), m.cur)
				m.term()
			default:
				continue // still starting: a SIGTERM now tests start-up, not leaving
			}
			actions++
		case !m.running() && m.startable():
			m.start()
			t.Logf("storm %v: start %s", time.Since(h.started).Round(time.Millisecond), m.cur)
			actions++
		}
	}
	prod.finish(h, false, 30*time.Second)
	// Everyone back, and drained.
	for _, m := range h.members {
		if !m.running() {
			if !m.startable() {
				m.cur.wait(stopBound)
			}
			if m.startable() {
				m.start()
			}
		}
	}
	h.judgeStops(true)
	h.waitDrained(90 * time.Second)
	t.Logf("storm: %d membership changes in %v", actions, over)
	h.finish(guarantee == exactlyOnce)
}

// TestSurvivorsOfACrashKeepRunning: a member is SIGKILLed and restarted;
// the other member must keep running while the dead member's partitions
// wait for its session to expire. Under the classic group protocol the
// rebalance is a barrier: the survivor's transaction could not end until
// the join was over (franz-go heartbeats before committing), a transaction
// timeout below the session timeout let the broker abort it and fence the
// producer, and one crash took the healthy member down with it. The
// transaction timeout here (5s) is below the broker's session timeout, so
// the test fails if that regime comes back.
func TestSurvivorsOfACrashKeepRunning(t *testing.T) {
	h := newHarness(t, exactlyOnce, 2, 90*time.Second, withTxnTimeout(5*time.Second))
	h.startGroup(2)
	prod := h.produceSteadily(0, 0, 150)
	h.sleep(2 * time.Second)
	victim, survivor := h.members[1], h.members[0]
	t.Logf("SIGKILL %s and restart it; %s must carry on", victim.cur, survivor.cur)
	victim.kill()
	victim.start()
	// The join ends when the dead member's session expires; watch past it.
	watchUntil := time.Now().Add(h.sessTimeout + 8*time.Second)
	for time.Now().Before(watchUntil) && !survivor.cur.exited() {
		h.sleep(250 * time.Millisecond)
	}
	if survivor.cur.exited() {
		t.Errorf("%s, which was not harmed, exited with %s while the group waited for the killed member's session "+
			"(transaction_timeout %v < session_timeout %v); log tail:\n%s",
			survivor.cur, survivor.cur.status(), h.txnTimeout, h.sessTimeout, survivor.cur.logTail(12))
		survivor.cur.judged = true
		survivor.start()
	}
	prod.finish(h, true, 30*time.Second)
	h.waitDrained(60 * time.Second)
	h.finish(true)
}

// TestRestoreAfterAnAbandonedTransaction: a store restored while an older
// transaction is still open on its changelog must still get every record
// committed after that transaction began.
//
// A member is frozen (SIGSTOP) holding a transaction that contains
// changelog records: it is caught during a rebalance that waits for a
// killed member's session, when every member's transaction stays open with
// its changelog records until the join ends. The frozen member's
// partitions move to another member, which restores them (the changelog's
// last stable offset is held back by the frozen transaction), processes
// and commits; then that member is stopped and the partitions move again,
// all within the frozen transaction's timeout. The third owner must restore
// what the second committed: the output must be exactly once with every
// count equal to the reference.
func TestRestoreAfterAnAbandonedTransaction(t *testing.T) {
	h := newHarness(t, exactlyOnce, 3, 240*time.Second, withTxnTimeout(25*time.Second))
	if !h.b.Real() {
		// On kfake a transaction ends within a millisecond or two of its
		// changelog records, so a SIGSTOP at a random moment almost never
		// lands between them (two runs in three missed, before this
		// session's changes too). Every TxnOffsetCommit is held 400 ms:
		// each commit point then has its changelog records in an open
		// transaction long enough to be caught. (Kafka's transaction end
		// takes longer by itself.) Not EndTxn: kfake answers a fetch of
		// committed offsets with UNSTABLE_OFFSET_COMMIT for the whole group
		// while any transaction holds offsets for it (Kafka does so per
		// partition), so with every EndTxn held the members' offsets were
		// pending most of the time and a new owner's fetch, retried each
		// second, could miss every gap until the test's deadline.
		fake := h.b.Fake()
		fake.ControlKey(int16(kmsg.TxnOffsetCommit), func(kmsg.Request) (kmsg.Response, error, bool) {
			fake.SleepControl(func() { time.Sleep(400 * time.Millisecond) })
			return nil, nil, false
		})
	}
	h.startGroup(3)
	prod := h.produceSteadily(0, 0, 150)
	h.sleep(2 * time.Second)
	a, c := h.members[0], h.members[2]

	var heldID string
	var heldParts []int32
	// Catching the member inside the short span between its changelog
	// records and the end of its transaction is luck; six rebalances make
	// a miss rare (one in three missed all of three on a loaded machine).
	const attempts = 6
	for attempt := 1; attempt <= attempts && heldID == ""; attempt++ {
		if !h.waitStableBeforeKill(45 * time.Second) {
			g, err := h.describeGroup()
			t.Fatalf("the group did not become stable: %s (err %v)", g, err)
		}
		g, err := h.describeGroup()
		if err != nil {
			t.Fatal(err)
		}
		owned := map[int32]bool{}
		for _, m := range g.members {
			if m.clientID == a.name {
				for _, p := range m.partitions {
					owned[p] = true
				}
			}
		}
		t.Logf("attempt %d: SIGKILL %s and restart it, then catch %s (partitions %v) in the rebalance", attempt, c.cur, a.cur, slices.Sorted(maps.Keys(owned)))
		c.kill()
		c.start()
		catchUntil := time.Now().Add(h.sessTimeout)
		for time.Now().Before(catchUntil) && heldID == "" {
			h.sleep(h.jitter(50*time.Millisecond, 150*time.Millisecond))
			a.cur.signal(syscall.SIGSTOP)
			// The rebalance may have moved partitions to or from it: what
			// it owns as it is frozen counts too (the group lists a frozen
			// member's assignment until its session expires).
			if g, err := h.describeGroup(); err == nil {
				for _, m := range g.members {
					if m.clientID == a.name {
						for _, p := range m.partitions {
							owned[p] = true
						}
					}
				}
			}
			first, err1 := h.openTxns()
			h.sleep(300 * time.Millisecond)
			second, err2 := h.openTxns()
			if err1 == nil && err2 == nil {
				for id, d := range first {
					d2, ok := second[id]
					parts := d2.Topics[h.changelog()]
					if !ok || d2.StartTimestamp != d.StartTimestamp || len(parts) == 0 {
						continue
					}
					mine := true
					for p := range parts {
						mine = mine && owned[p]
					}
					if mine {
						heldID = id
						heldParts = slices.Sorted(maps.Keys(parts))
					}
				}
			}
			if heldID == "" {
				a.cur.signal(syscall.SIGCONT)
			}
		}
	}
	if heldID == "" {
		prod.finish(h, true, 30*time.Second)
		t.Fatalf("never caught %s holding a transaction with changelog records in %d rebalances: is the host transactional under exactly_once? (open transactions: %s)",
			a.cur, attempts, h.openTxnsString())
	}
	frozenAt := time.Now()
	t.Logf("%s frozen holding transaction %s with changelog records on partitions %v", a.cur, heldID, heldParts)

	// The frozen member's partitions move and are processed and committed
	// by their new owner.
	var second *member
	before, err := h.committed()
	if err != nil {
		t.Fatal(err)
	}
	for second == nil {
		h.checkDeadline("waiting for the frozen member's partitions to move")
		h.restartDead()
		g, err := h.describeGroup()
		now, err2 := h.committed()
		if err == nil && err2 == nil && g.state == "Stable" {
			for _, m := range g.members {
				for _, p := range m.partitions {
					if slices.Contains(heldParts, p) && m.clientID != a.name && now[p] > before[p] {
						for _, mm := range h.members {
							if mm.name == m.clientID {
								second = mm
							}
						}
					}
				}
			}
		}
		if second == nil && time.Since(frozenAt) > h.sessTimeout+30*time.Second {
			t.Fatalf("the frozen member's partitions %v were not taken over and committed on within %v: group %s (err %v); committed %v, before the freeze %v (err %v)",
				heldParts, time.Since(frozenAt).Round(time.Second), g, err, now, before, err2)
		}
		if second == nil {
			h.sleep(200 * time.Millisecond)
		}
	}
	t.Logf("%s took over and committed on %v %v after the freeze; stopping it so they move again", second.cur, heldParts, time.Since(frozenAt).Round(time.Millisecond))
	if left := h.txnTimeout - time.Since(frozenAt); left < 5*time.Second {
		t.Logf("warning: only %v left before the frozen transaction times out; the second move may come too late to matter", left)
	}
	second.cur.waitUp(10 * time.Second)
	second.term()
	h.judgeStops(true)
	h.sleep(3 * time.Second)
	second.start()

	prod.finish(h, true, 30*time.Second)
	a.kill() // the frozen process: its transaction is aborted at its timeout
	h.waitDrained(90 * time.Second)
	h.finish(true)
}
