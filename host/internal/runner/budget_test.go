package runner

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// slowCommitPlugin marks every record's key; its commit calls take delay
// each, then emit "commit:<key>".
type slowCommitPlugin struct {
	delay time.Duration
	calls atomic.Int64
	// inFlight is the commit calls running now; mostInFlight the most
	// seen at once.
	inFlight, mostInFlight atomic.Int64
}

type slowCommitInstance struct {
	p   *slowCommitPlugin
	env Env
}

func (p *slowCommitPlugin) Instantiate(_ context.Context, _ TaskID, env Env) (Processor, error) {
	return &slowCommitInstance{p: p, env: env}, nil
}

func (i *slowCommitInstance) Process(_ context.Context, rec *abi.Record) error {
	_, err := i.env.Time.Mark(rec.Key, rec.Timestamp)
	return err
}

func (i *slowCommitInstance) TimeCallbacks() (bool, bool) { return false, true }
func (i *slowCommitInstance) OnTimer(context.Context, *abi.Trigger) error {
	return fmt.Errorf("no timers")
}

func (i *slowCommitInstance) OnCommit(_ context.Context, trig *abi.Trigger) error {
	n := i.p.inFlight.Add(1)
	for m := i.p.mostInFlight.Load(); n > m && !i.p.mostInFlight.CompareAndSwap(m, n); m = i.p.mostInFlight.Load() {
	}
	time.Sleep(i.p.delay) // a callback slower than the commit interval
	i.p.inFlight.Add(-1)
	i.p.calls.Add(1)
	return i.env.Sink.Emit(0, &abi.Record{Key: trig.Key, Value: []byte("commit:" + string(trig.Key)), Partition: abi.AnyPartition})
}

func (*slowCommitPlugin) Close(context.Context) error { return nil }

func (i *slowCommitInstance) Close(context.Context) error { return nil }

// A commit point's calls share one deadline across all tasks (ABI.md
// 8.3): with 16 tasks whose commit calls each take longer than the commit
// interval, a commit point makes about GOMAXPROCS calls, in parallel, not
// sixteen (which would take it past the transaction timeout at a larger
// scale), the tasks it did not reach go first at the next one, and every
// marked key is called exactly once in the committed output.
func TestCommitPointCallsShareOneBudget(t *testing.T) {
	for _, eos := range []bool{true, false} {
		t.Run(guarantee(eos).String(), func(t *testing.T) {
			const tasks = 16
			f := newFixture(t, eos, tasks)
			f.createChangelogs(t, tasks)
			p := &slowCommitPlugin{delay: 150 * time.Millisecond}
			r, _ := f.timeRunner(t, p, t.TempDir(), Fail)
			r.opts.CommitInterval = 100 * time.Millisecond
			stop := start(t, r)
			for k := range tasks {
				f.b.ProduceTo(t, int32(k), &kgo.Record{Topic: f.in, Key: []byte(fmt.Sprintf("k%02d", k)), Value: []byte("v")})
			}
			testutil.Eventually(t, 60*time.Second, func() error {
				if n := p.calls.Load(); n < tasks {
					return fmt.Errorf("%d commit calls of %d", n, tasks)
				}
				return nil
			})
			f.waitCommitted(t, f.endOffsets(t, f.in))
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			out := f.outputs(t)
			for k := range tasks {
				if c := count(out, fmt.Sprintf("commit:k%02d", k)); c != 1 {
					t.Errorf("key k%02d was called %d times in the committed output: %q", k, c, out)
				}
			}
			s := r.Stats("upper")
			if s.TimePointsCut.Load() == 0 {
				t.Error("no commit point ran out of budget: every task's calls fit in one, the test proved nothing")
			}
			procs := int64(runtime.GOMAXPROCS(0))
			if most := p.mostInFlight.Load(); most > procs {
				t.Errorf("%d commit calls ran at once, more than GOMAXPROCS (%d)", most, procs)
			} else if procs > 1 && most < 2 {
				t.Errorf("the tasks' commit calls ran one at a time (GOMAXPROCS %d)", procs)
			}
			lat, n, _ := r.CommitLatencies()
			var worst time.Duration
			for _, d := range lat {
				worst = max(worst, d)
			}
			t.Logf("%d commit calls, %d commit points cut, %d commit points, the longest %v", p.calls.Load(), s.TimePointsCut.Load(), n, worst)
		})
	}
}
