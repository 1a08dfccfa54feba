package control

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/testbroker"
)

// Shadow records: StartShadow writes the candidate's chunks and the
// record, Load and FollowAll read it with its bytes, StopShadow stops only
// the run named (ErrNoShadow otherwise), and an undecodable record is
// reported as no shadow.
func TestShadowRecords(t *testing.T) {
	b := testbroker.New(t)
	cfg := newTopic(t, b)
	ctx := testCtx(t, 30*time.Second)
	pub := openPublisher(t, cfg)

	if sh, load := load(t, cfg).Shadow("p"); sh.Running || sh.Offset != -1 || load != nil {
		t.Fatalf("a processor never shadowed: %+v", sh)
	}
	if _, err := pub.StopShadow(ctx, "p", "x", "bob", -1); !errors.Is(err, ErrNoShadow) {
		t.Fatalf("stop with no shadow: %v, want ErrNoShadow", err)
	}
	module := bytes.Repeat([]byte("candidate "), ChunkSize/4) // 2.5 chunks: three
	sh, err := pub.StartShadow(ctx, "p", module, "v2", "deploy --shadow", "bob")
	if err != nil || !sh.Running || sh.Label != "v2" || sh.Chunks != 3 || sh.Offset < 0 {
		t.Fatalf("StartShadow = %+v, %v", sh, err)
	}
	got, loadFn := load(t, cfg).Shadow("p")
	if !got.Running || got.Offset != sh.Offset || got.Hash != sh.Hash || loadFn == nil {
		t.Fatalf("Load: %+v", got)
	}
	if wasm, err := loadFn(ctx); err != nil || !bytes.Equal(wasm, module) {
		t.Fatalf("the candidate's bytes: %d bytes, %v", len(wasm), err)
	}
	if _, err := pub.StopShadow(ctx, "p", "x", "bob", sh.Offset+1000); !errors.Is(err, ErrNoShadow) {
		t.Fatalf("stop of another run: %v, want ErrNoShadow", err)
	}
	stopped, err := pub.StopShadow(ctx, "p", "refused: too many failures", "bob", sh.Offset)
	if err != nil || stopped.Running || stopped.Reason != "refused: too many failures" {
		t.Fatalf("StopShadow = %+v, %v", stopped, err)
	}
	if got, _ := load(t, cfg).Shadow("p"); got.Running || got.Offset != stopped.Offset {
		t.Fatalf("after the stop: %+v", got)
	}

	// FollowAll reports each record; an undecodable one is an error and
	// no shadow.
	r := openReader(t, cfg)
	if _, err := r.Load(ctx); err != nil {
		t.Fatal(err)
	}
	type ev struct {
		sh   Shadow
		load Load
		err  error
	}
	evs := make(chan ev, 10)
	fctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- r.FollowAll(fctx, Handlers{Shadow: func(sh Shadow, l Load, err error) { evs <- ev{sh, l, err} }})
	}()
	t.Cleanup(func() { cancel(); <-done })
	next := func() ev {
		t.Helper()
		select {
		case e := <-evs:
			return e
		case <-time.After(30 * time.Second):
			t.Fatal("no shadow record followed")
			return ev{}
		}
	}
	if _, err := pub.StartShadow(ctx, "p", module, "v3", "", "carol"); err != nil {
		t.Fatal(err)
	}
	if e := next(); e.err != nil || !e.sh.Running || e.sh.Label != "v3" || e.load == nil {
		t.Fatalf("followed: %+v %v", e.sh, e.err)
	}
	cl := b.Client(t)
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: cfg.Topic, Key: []byte("shadow/p"), Value: []byte(`{"format":1,"processor":"q"}`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if e := next(); e.err == nil || !errors.Is(e.err, ErrCorrupt) || e.sh.Running {
		t.Fatalf("an undecodable record: %+v %v, want ErrCorrupt and no shadow", e.sh, e.err)
	}
	if got, _ := load(t, cfg).Shadow("p"); got.Running {
		t.Fatalf("after an undecodable record: %+v, want none running", got)
	}
}
