package runner

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/state"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// A state write the changelog would refuse fails its record: the store refuses an entry over what its changelog takes in one
// record (setEntryLimits), at the write, so it never reaches a transaction.

// putPlugin writes each record's value under its key into store 0, then
// emits "ok" for it to output 0. A write the store refuses fails the record
// with the store's error, as the engine fails it (limit exceeded).
type putPlugin struct{}

func (putPlugin) Close(context.Context) error { return nil }

func (putPlugin) Instantiate(_ context.Context, _ TaskID, env Env) (Processor, error) {
	return &putInstance{env: env}, nil
}

type putInstance struct{ env Env }

func (i *putInstance) Process(_ context.Context, rec *abi.Record) error {
	if err := i.env.State.Put(0, rec.Key, rec.Value); err != nil {
		return &KindError{Kind: FailureLimitExceeded, Err: err}
	}
	return i.env.Sink.Emit(0, &abi.Record{Key: rec.Key, Value: []byte("ok"), Partition: abi.AnyPartition, Timestamp: rec.Timestamp})
}

func (i *putInstance) Close(context.Context) error { return nil }

// changelogCase runs putPlugin over n inputs, the bad ones with values its
// changelog refuses, with on_error: dead_letter, and checks that exactly
// the bad ones are dead-lettered (kind limit_exceeded, or kind refused
// when the runner reads no limits), the others come out (once under
// exactly_once) and are in the changelog, the bad ones are not, with at
// most maxAborts refusal aborts and maxRestarts runner restarts.
type changelogCase struct {
	eos bool
	// noLimits: the runner reads no topic limits, so every refusal is
	// one no limit explains (as a broker's own reasons are).
	noLimits bool
	clogConf map[string]string // the changelog's config when created
	lower    map[string]string // set on the changelog after the first quarter
	n        int
	bad      func(i int) bool
	value    func(i int) []byte
	// maxAborts and maxRestarts bound the refusal aborts and the runner
	// restarts.
	maxAborts, maxRestarts int64
}

func (c changelogCase) run(t *testing.T) {
	f := newFixture(t, c.eos, 2)
	clog := f.b.Name(t, "clog")
	f.b.CreateTopic(t, clog, 2, c.clogConf)
	db, err := state.Open(t.TempDir(), state.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	key := func(i int) []byte { return []byte("k" + strconv.Itoa(i)) }
	produce := func(from, to int) {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Topic: f.in, Key: key(i), Value: c.value(i)})
		}
		f.b.Produce(t, recs...)
	}
	stats := map[string]*Stats{"upper": newStats()}
	refused := NewRefused()
	mk := func() *Runner {
		return f.runnerWith(t, putPlugin{}, DeadLetter, func(o *Options) {
			o.Stats = stats
			o.Refused = refused
			if !c.noLimits {
				o.Limits = BrokerLimits(o.Kafka)
			}
			o.State = db
			o.Processors[0].Stores = []string{"s"}
			o.Processors[0].Changelogs = []string{clog}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- int(runUntilDone(t, ctx, mk)) }()
	first := c.n / 4
	produce(0, first)
	f.waitCommitted(t, f.endOffsets(t, f.in))
	if c.lower != nil {
		alterTopic(t, f, clog, "lowering the changelog's limits", c.lower)
		// A broker applies a topic's new config a moment after it
		// answers (Kafka's did not yet refuse the large writes of the
		// next records in one run): wait until it refuses one (under a
		// key no input has).
		cl := f.b.Client(t)
		testutil.Eventually(t, 30*time.Second, func() error {
			pctx, pcancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer pcancel()
			err := cl.ProduceSync(pctx, &kgo.Record{Topic: clog, Key: []byte("probe"), Value: letters(6000, 0)}).FirstErr()
			if errors.Is(err, kerr.MessageTooLarge) {
				return nil
			}
			return fmt.Errorf("the changelog still takes a record of 6000 bytes (%v)", err)
		})
	}
	produce(first, c.n)
	f.waitCommitted(t, f.endOffsets(t, f.in))
	cancel()
	restarts := <-done

	out := map[string]int{}
	for _, o := range f.b.ReadCommittedAfterStop(t, f.out, 30*time.Second) {
		out[string(o.Key)]++
	}
	wantKind := FailureLimitExceeded
	if c.noLimits {
		wantKind = FailureRefused
	}
	dead := map[string]int{}
	for _, d := range f.b.ReadCommittedAfterStop(t, f.dlq, 30*time.Second) {
		dead[string(d.Key)]++
		for _, h := range d.Headers {
			if h.Key == HeaderErrorKind && string(h.Value) != wantKind.String() {
				t.Errorf("dead letter %s: kind %s", d.Key, h.Value)
			}
			if h.Key == HeaderError && len(dead) == 1 {
				t.Logf("dead letter %s: %s", d.Key, h.Value)
			}
		}
	}
	logged := map[string]bool{}
	for _, r := range f.b.ReadCommittedAfterStop(t, clog, 30*time.Second) {
		logged[string(r.Key)] = true
	}
	bad := 0
	for i := range c.n {
		k := string(key(i))
		switch {
		case c.bad(i):
			bad++
			// Under at_least_once the outputs of the window the broker
			// refused were acknowledged before the changelog was.
			if (c.eos || c.maxAborts == 0) && out[k] != 0 || logged[k] {
				t.Errorf("input %s, whose write the changelog refuses: %d outputs, in the changelog: %v", k, out[k], logged[k])
			}
			if dead[k] == 0 || c.eos && dead[k] != 1 {
				t.Errorf("input %s, whose write the changelog refuses: %d dead letters", k, dead[k])
			}
		default:
			if out[k] == 0 || c.eos && out[k] != 1 || !logged[k] {
				t.Errorf("input %s: %d outputs, in the changelog: %v", k, out[k], logged[k])
			}
			if dead[k] != 0 {
				t.Errorf("input %s, accepted, was dead-lettered", k)
			}
		}
	}
	s := stats["upper"]
	if a := s.RefusalAborts.Load(); a > c.maxAborts {
		t.Errorf("%d refusal aborts, want at most %d", a, c.maxAborts)
	}
	if c.maxAborts == 0 && s.Aborts.Load() != 0 {
		t.Errorf("%d aborts, want none", s.Aborts.Load())
	}
	if int64(restarts) > c.maxRestarts {
		t.Errorf("%d runner restarts, want at most %d", restarts, c.maxRestarts)
	}
	t.Logf("%d refused writes: %d refusal aborts, %d aborts, %d restarts, %d dead letters",
		bad, s.RefusalAborts.Load(), s.Aborts.Load(), restarts, len(dead))
}

func TestChangelogRefusesWrites(t *testing.T) {
	for _, mode := range []struct {
		name string
		eos  bool
	}{{"exactly_once", true}, {"at_least_once", false}} {
		t.Run(mode.name, func(t *testing.T) {
			// The changelog takes 8 KiB records; values at its limit and
			// a byte over it, with the limits known from the start: the
			// writes over it fail their records at the write, and nothing
			// aborts (without the check, the first changelog record over
			// it aborted its window, again on every pass).
			t.Run("KnownLimit", func(t *testing.T) {
				const maxBytes = 8192
				bad := func(i int) bool { return i%50 == 7 }
				changelogCase{
					eos: mode.eos, n: 200,
					clogConf: map[string]string{"max.message.bytes": strconv.Itoa(maxBytes)},
					bad:      bad,
					value: func(i int) []byte {
						room := maxBytes - changelogOverhead - len("k"+strconv.Itoa(i))
						switch {
						case bad(i):
							return letters(room+1+i%300, i)
						case i%50 == 8:
							return letters(room, i) // exactly at the limit
						}
						return letters(100, i)
					},
				}.run(t)
			})
			// An operator lowers the changelog's max.message.bytes while
			// the runner runs: the first refused changelog record aborts
			// its window and makes the runner read the limits again (and
			// restart: its client's batches for the changelog were
			// larger than the topic now takes); from then on the store
			// refuses the large writes as their records' failures.
			t.Run("LoweredMaxMessageBytes", func(t *testing.T) {
				bad := func(i int) bool { return i%100 == 70 && i >= 100 }
				changelogCase{
					eos: mode.eos, n: 400,
					lower:       map[string]string{"max.message.bytes": "4096"},
					bad:         bad,
					maxAborts:   1,
					maxRestarts: 1,
					value: func(i int) []byte {
						if bad(i) {
							return letters(6000, i)
						}
						return letters(100, i)
					},
				}.run(t)
			})
		})
	}
}

// A changelog refusal that no limit explains (the runner reads none here;
// a broker's own reasons look the same): the window aborts once, probing
// finds the changelog record, and on the next pass the call that makes
// that write again fails (kind refused, with the broker's error), where it
// used to loop: five aborts, a restart, and again. Each refused write
// costs at most one abort; no runner restarts.
func TestChangelogRefusalUnexplained(t *testing.T) {
	for _, mode := range []struct {
		name string
		eos  bool
	}{{"exactly_once", true}, {"at_least_once", false}} {
		t.Run(mode.name, func(t *testing.T) {
			// Neighbours stay far below the limit together, so only the
			// bad values make a batch the changelog refuses (without
			// limits the client's batches are the producer's 1 MB).
			bad := func(i int) bool { return i%100 == 70 }
			changelogCase{
				eos: mode.eos, noLimits: true, n: 400,
				clogConf:  map[string]string{"max.message.bytes": "262144"},
				bad:       bad,
				maxAborts: 4, // one per bad record at most
				value: func(i int) []byte {
					if bad(i) {
						return letters(300_000, i)
					}
					return letters(100, i)
				},
			}.run(t)
		})
	}
}

// A timer is an entry of the time store (its key plus 11 bytes), and the
// time store's changelog limits it like any store's: a timer_set whose
// entry the changelog would refuse fails with the store's error (which the
// engine makes ETOOLARGE and the call's failure), and sets nothing.
func TestTimerOverTheTimeChangelog(t *testing.T) {
	db, err := state.Open(t.TempDir(), state.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	st := db.Task("p", 0, []string{"s", "_time.p"})
	k := newTimekeeper(st, 1, TimeLimits{})
	st.SetEntryLimit(1, 100)
	if _, err := k.SetTimer(abi.TimerEventTime, 5, make([]byte, 90)); !errors.Is(err, state.ErrEntryTooLarge) {
		t.Fatalf("a timer of 101 bytes against a limit of 100: %v", err)
	}
	if added, err := k.SetTimer(abi.TimerEventTime, 5, make([]byte, 89)); err != nil || !added {
		t.Fatalf("a timer of 100 bytes: %v, %v", added, err)
	}
	if k.staged != 1 {
		t.Fatalf("%d timers staged, want the one set", k.staged)
	}
}
