package runner

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host/internal/account"
	"github.com/wasmstream/wasmstream/host/internal/state"
	"github.com/wasmstream/wasmstream/host/internal/versions"
)

// fakeStrategy records what the commit point asks of a guarantee and
// answers as told.
type fakeStrategy struct {
	isOpen        bool
	sealed        []bool // the commit argument of every seal
	sealCommitted bool
	sealErr       error
	sealProduce   error // a produce failure that "happens" during the seal
	offsetsRetry  bool
	offsetsErr    error
	rewound       int
	transactional bool
	offsetCommits int
	cp            *commitPoint
}

func (f *fakeStrategy) open() error                  { f.isOpen = true; return nil }
func (f *fakeStrategy) pending() bool                { return f.isOpen }
func (f *fakeStrategy) abortsOnProduceFailure() bool { return f.transactional }
func (f *fakeStrategy) rewind(*task)                 { f.rewound++ }
func (f *fakeStrategy) seal(_ context.Context, _ map[string]map[int32]kgo.EpochOffset, commit bool) (bool, error) {
	f.sealed = append(f.sealed, commit)
	f.isOpen = false
	if f.sealProduce != nil {
		f.cp.onProduced(&kgo.Record{Topic: "out"}, f.sealProduce)
		if f.transactional {
			return false, nil // the transaction aborts
		}
	}
	return commit && f.sealCommitted, f.sealErr
}
func (f *fakeStrategy) commitOffsets(context.Context, map[string]map[int32]kgo.EpochOffset) (bool, error) {
	f.offsetCommits++
	return f.offsetsRetry, f.offsetsErr
}
func (*fakeStrategy) wantsCommit() bool                                     { return false }
func (*fakeStrategy) beforeRevoke(context.Context)                          {}
func (*fakeStrategy) beforeLose()                                           {}
func (*fakeStrategy) lockForCallback(callbackKind, map[string][]int32) bool { return false } // no group here
func (*fakeStrategy) rearm(context.Context)                                 {}
func (*fakeStrategy) runQueued(context.Context)                             {}

// cpOutcome is what a commit point left behind. The fake guarantee's
// rewind counts the tasks set back and leaves their cursors (the real ones
// clear them): cursorOpen is false only where the window committed.
type cpOutcome struct {
	err          string // "" for nil, else a substring
	broken       bool
	sealed       string // the commit arguments of the seals, "C" commit "A" abort
	commits      int64  // Stats.Commits
	aborts       int64  // Stats.Aborts
	rewound      int    // tasks set back
	cursorOpen   bool   // the task's window still holds its record
	produceAbort int    // consecutive produce aborts
	rolledBack   bool   // the task went back to the previous version
}

// TestCommitPointTransitions drives one commit point of a runner with one
// stateless task that processed one record, through a fake guarantee, in
// every way a window can end, and checks the one outcome each must have,
// whichever the guarantee.
func TestCommitPointTransitions(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name string
		set  func(f *fakeStrategy, cp *commitPoint, tk *task)
		want cpOutcome
	}{
		{"commit", func(f *fakeStrategy, _ *commitPoint, _ *task) {},
			cpOutcome{sealed: "C", commits: 1}},
		{"nothing to commit", func(f *fakeStrategy, cp *commitPoint, _ *task) { f.isOpen, cp.sinceCommit = false, 0 },
			cpOutcome{cursorOpen: true}},
		{"the transaction aborts (a rebalance)", func(f *fakeStrategy, _ *commitPoint, _ *task) {
			f.transactional, f.sealCommitted = true, false
		}, cpOutcome{sealed: "C", aborts: 1, rewound: 1, cursorOpen: true}},
		{"a produce failed before: exactly_once aborts and redoes", func(f *fakeStrategy, cp *commitPoint, _ *task) {
			f.transactional = true
			cp.onProduced(&kgo.Record{Topic: "out"}, boom)
		}, cpOutcome{sealed: "A", aborts: 1, rewound: 1, cursorOpen: true, produceAbort: 1}},
		{"a produce failed during the seal: exactly_once aborts", func(f *fakeStrategy, _ *commitPoint, _ *task) {
			f.transactional, f.sealProduce = true, boom
		}, cpOutcome{sealed: "C", aborts: 1, rewound: 1, cursorOpen: true, produceAbort: 1}},
		{"the fifth produce abort in a row breaks the runner", func(f *fakeStrategy, cp *commitPoint, _ *task) {
			f.transactional = true
			cp.produceAborts = maxProduceAborts - 1
			cp.onProduced(&kgo.Record{Topic: "out"}, boom)
		}, cpOutcome{err: "5 commit windows in a row aborted", broken: true, sealed: "A", aborts: 1, rewound: 1, cursorOpen: true, produceAbort: maxProduceAborts}},
		{"a produce failed before: at_least_once breaks without sealing", func(f *fakeStrategy, cp *commitPoint, _ *task) {
			cp.onProduced(&kgo.Record{Topic: "out"}, boom)
		}, cpOutcome{err: "offsets not committed past the failed records", broken: true, cursorOpen: true}},
		{"a produce failed during the flush: at_least_once breaks before the offsets", func(f *fakeStrategy, _ *commitPoint, _ *task) {
			f.sealProduce = boom
		}, cpOutcome{err: "offsets not committed past the failed records", broken: true, sealed: "C", cursorOpen: true}},
		{"the seal fails: broken", func(f *fakeStrategy, _ *commitPoint, _ *task) { f.sealErr = boom },
			cpOutcome{err: "boom", broken: true, sealed: "C", cursorOpen: true}},
		{"a failed canary aborts and rolls back", func(f *fakeStrategy, _ *commitPoint, tk *task) {
			tk.canaryIn, tk.canaryFailed = 10, 5
		}, cpOutcome{sealed: "A", rewound: 1, cursorOpen: true, rolledBack: true}},
		{"the local store cannot take the window: broken", func(f *fakeStrategy, _ *commitPoint, tk *task) {
			db, err := state.Open(t.TempDir(), state.Options{Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			tk.st = db.Task("p", 0, []string{"s"})
			_ = db.Close() // Apply fails: the database is closed
		}, cpOutcome{err: "applying state", broken: true, sealed: "C", cursorOpen: true}},
		{"the group refuses the offsets: they wait for the next commit point", func(f *fakeStrategy, _ *commitPoint, _ *task) {
			f.offsetsRetry = true
		}, cpOutcome{sealed: "C", cursorOpen: true}},
		{"the offset commit fails: broken", func(f *fakeStrategy, _ *commitPoint, _ *task) { f.offsetsErr = boom },
			cpOutcome{err: "committing offsets: boom", broken: true, sealed: "C", cursorOpen: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, f, tk := commitPointFixture(t)
			c.set(f, r.cp, tk)
			err := r.cp.commit(context.Background())
			got := cpOutcome{broken: r.cp.broken != nil, commits: tk.proc.Stats.Commits.Load(),
				aborts: tk.proc.Stats.Aborts.Load(), rewound: f.rewound, produceAbort: r.cp.produceAborts,
				rolledBack: tk.ver.ID == "v1"}
			for _, s := range f.sealed {
				got.sealed += map[bool]string{true: "C", false: "A"}[s]
			}
			_, got.cursorOpen = tk.win.in(0).commitOffset()
			if err != nil {
				got.err = c.want.err
				if c.want.err == "" || !strings.Contains(err.Error(), c.want.err) {
					t.Errorf("commit = %v, want error containing %q", err, c.want.err)
				}
			} else if c.want.err != "" {
				t.Errorf("commit = nil, want an error containing %q", c.want.err)
			}
			if got != c.want {
				t.Errorf("outcome %+v\n   want %+v", got, c.want)
			}
			if r.cp.sinceCommit != 0 || time.Since(r.cp.lastCommit) > time.Minute {
				t.Errorf("the schedule did not restart: %d records since %v", r.cp.sinceCommit, r.cp.lastCommit)
			}
			// A broken runner commits nothing again.
			if got.broken {
				f.sealed = nil
				if err := r.cp.commit(context.Background()); err == nil || len(f.sealed) != 0 {
					t.Errorf("a broken runner's next commit point: %v, %d seals", err, len(f.sealed))
				}
			}
		})
	}
}

// commitPointFixture is a runner with one stateless task that processed
// one record (offset 7) in an open window, its version in a canary window
// that a test may fail, and a fake guarantee.
func commitPointFixture(t *testing.T) (*Runner, *fakeStrategy, *task) {
	t.Helper()
	r := &Runner{opts: Options{CommitInterval: time.Second, CommitRecords: 1000}, log: slog.New(slog.DiscardHandler),
		tasks: map[TaskID]*task{}}
	f := &fakeStrategy{sealCommitted: true}
	r.cp = &commitPoint{r: r, g: f}
	f.cp = r.cp
	ps := &procState{spec: ProcessorSpec{Name: "p"}, Stats: newStats()}
	r.procs = []*procState{ps}
	r.vers = versions.New[Plugin](nil)
	r.vers.Start("p", versions.Info{ID: "v1"}, &goPlugin{})
	canary := versions.Canary{Window: time.Minute, MaxFailureRatio: 0.1, MinRecords: 1}
	if err := r.vers.Propose("p", versions.Info{ID: "v2"}, &goPlugin{}, canary); err != nil {
		t.Fatal(err)
	}
	r.vers.TakePending("p")
	cur := r.vers.Active("p")
	tk := &task{id: TaskID{Processor: "p", Topic: "in"}, r: r, proc: ps, topics: []string{"in"},
		win: newWindow(1, 0), tk: newTimekeeper(nil, -1, TimeLimits{}), acct: testAccount(), ver: newVersion(cur, canary), swappedAt: time.Now()}
	tk.inst = &goInstance{p: &goPlugin{}}
	r.tasks[tk.id] = tk
	tk.win.in(0).take(7)
	tk.win.in(0).processed(7, 0)
	tk.canaryIn = 10
	_ = f.open()
	r.cp.processed(1)
	return r, f, tk
}

// The task's account (package account) is released by every end of a
// window: a commit, an abort, a broken runner. Commit marks still carried
// after it stay charged (an aborted commit point's are carried again; a
// committed one handled them: the fixture's instance has no on_commit, so
// they were dropped); closing the task releases the rest.
func TestCommitPointReleasesTheAccount(t *testing.T) {
	boom := errors.New("boom")
	for _, c := range []struct {
		name    string
		set     func(*fakeStrategy, *commitPoint)
		carried bool
	}{
		{"commit", func(*fakeStrategy, *commitPoint) {}, false},
		{"abort", func(f *fakeStrategy, cp *commitPoint) {
			f.transactional = true
			cp.onProduced(&kgo.Record{Topic: "out"}, boom)
		}, true},
		{"broken", func(f *fakeStrategy, _ *commitPoint) { f.sealErr = boom }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, f, tk := commitPointFixture(t)
			pool := account.NewPool(1 << 30)
			tk.acct = pool.Open(DefaultWindowBytes, &tk.proc.Stats.HeldBytes)
			tk.tk.hold = tk.hold
			tk.tk.carried = map[string]int64{"carried": 1} // a mark no commit point called yet
			tk.tk.carriedBytes = len("carried")
			if err := tk.hold(5 << 20); err != nil {
				t.Fatal(err)
			}
			if _, err := tk.tk.Mark([]byte("marked"), 1); err != nil {
				t.Fatal(err)
			}
			c.set(f, r.cp)
			_ = r.cp.commit(context.Background())
			want, grant := int64(0), int64(0)
			if c.carried {
				want, grant = int64(len("carried")+markOverhead), account.Grant
			}
			if got := tk.acct.Held(); got != want || int64(tk.tk.carriedHeld()) != want {
				t.Errorf("held %d after the window ended, carried marks %d; want %d", got, tk.tk.carriedHeld(), want)
			}
			if g := tk.proc.Stats.HeldBytes.Load(); g != grant {
				t.Errorf("gauge %d, want %d", g, grant)
			}
			tk.acct.Close()
			if pool.Granted() != 0 || tk.proc.Stats.HeldBytes.Load() != 0 {
				t.Errorf("after close: pool %d, gauge %d", pool.Granted(), tk.proc.Stats.HeldBytes.Load())
			}
		})
	}
}
