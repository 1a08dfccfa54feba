package runner

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/state"
)

// hexPlugin is countPlugin with the counts stored in hexadecimal, and a
// migration (Migrator) from countPlugin's decimal counts.
type hexPlugin struct{}

func (hexPlugin) Close(context.Context) error { return nil }

func (hexPlugin) Instantiate(_ context.Context, _ TaskID, env Env) (Processor, error) {
	var st StateView = env.State
	if env.Overlay != nil {
		st = env.Overlay
	}
	return &hexInstance{st: st, sink: env.Sink}, nil
}

type hexInstance struct {
	st       StateView
	sink     Sink
	migrated []string // the versions migrated from
}

func (i *hexInstance) Process(_ context.Context, rec *abi.Record) error {
	v, _, err := i.st.Get(0, rec.Key)
	if err != nil {
		return err
	}
	n, _ := strconv.ParseInt(string(v), 16, 64)
	n++
	if err := i.st.Put(0, rec.Key, []byte(strconv.FormatInt(n, 16))); err != nil {
		return err
	}
	return i.sink.Emit(0, &abi.Record{Key: rec.Key, Value: []byte(strconv.FormatInt(n, 10)), Partition: abi.AnyPartition})
}

func (i *hexInstance) Migrates() bool { return true }

func (i *hexInstance) Migrate(_ context.Context, from string) error {
	i.migrated = append(i.migrated, from)
	it, err := i.st.Scan(0, nil, nil)
	if err != nil {
		return err
	}
	var keys, vals [][]byte
	for {
		k, v, ok, err := it.Next()
		if err != nil {
			it.Close()
			return err
		}
		if !ok {
			break
		}
		keys, vals = append(keys, append([]byte(nil), k...)), append(vals, append([]byte(nil), v...))
	}
	it.Close()
	for j, k := range keys {
		n, err := strconv.Atoi(string(vals[j]))
		if err != nil {
			return err
		}
		if err := i.st.Put(0, k, []byte(strconv.FormatInt(int64(n), 16))); err != nil {
			return err
		}
	}
	return nil
}

func (i *hexInstance) Close(context.Context) error { return nil }

// A shadow candidate that migrates the state (decimal counts to
// hexadecimal) runs its migration into its overlay before its first
// record, on state the active version wrote and recorded: it then matches
// the active version on every record (it would differ on nearly all of
// them reading decimal as hexadecimal), and the active counts are
// untouched.
func TestShadowMigratingCandidate(t *testing.T) {
	const n, keys = 600, 20
	f := newFixture(t, true, 2)
	db, err := state.Open(t.TempDir(), state.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	clog, tlog := f.b.Name(t, "clog"), f.b.Name(t, "tlog")
	f.b.CreateTopic(t, clog, 2, nil)
	f.b.CreateTopic(t, tlog, 2, nil)
	produce := func(from, to int) {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Topic: f.in, Key: []byte("k" + strconv.Itoa(i%keys)), Value: []byte("x")})
		}
		f.b.Produce(t, recs...)
	}
	runner := func() *Runner {
		return f.runnerWith(t, countPlugin{}, Fail, func(o *Options) {
			o.State = db
			o.Processors[0].Stores = []string{"counts", "_time.upper"}
			o.Processors[0].Changelogs = []string{clog, tlog}
			o.Processors[0].TimeStore = true
		})
	}
	// The active version writes decimal counts, and records itself.
	produce(0, n)
	r := runner()
	stop := start(t, r)
	f.waitCommitted(t, f.endOffsets(t, f.in))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// The migrating candidate beside it, on that state.
	r = runner()
	if err := r.StartShadow("upper", "hex", hexPlugin{}, ShadowLimits{TimeCap: 10 * time.Second}, nil); err != nil {
		t.Fatal(err)
	}
	stop = start(t, r)
	produce(n, 2*n)
	f.waitCommitted(t, f.endOffsets(t, f.in))
	st, _ := r.ShadowStatus("upper")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if want := (ShadowCounts{Records: n, Matches: n}); st.Total != want {
		t.Fatalf("shadow counts %+v, want %+v (stopped %q)", st.Total, want, st.Stopped)
	}
}
