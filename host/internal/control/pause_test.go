package control

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/testbroker"
)

// Pause records: SetPause writes them (not twice the same), Load and
// FollowAll read them in topic order with the manifests, a tombstone is
// "not paused", and an undecodable record is reported and leaves the
// processor's pause as it was.
func TestPauseRecords(t *testing.T) {
	b := testbroker.New(t)
	cfg := newTopic(t, b)
	ctx := testCtx(t, 30*time.Second)
	pub := openPublisher(t, cfg)

	if paused, p := load(t, cfg).Paused("p"); paused || p.Offset != -1 {
		t.Fatalf("a processor never paused: %v %+v", paused, p)
	}
	if _, err := pub.SetPause(ctx, "p", false, "bob"); !errors.Is(err, ErrSamePause) {
		t.Fatalf("resume of a processor never paused: %v, want ErrSamePause", err)
	}
	p1, err := pub.SetPause(ctx, "p", true, "bob")
	if err != nil || !p1.Paused || p1.By != "bob" || p1.Processor != "p" || p1.Offset < 0 {
		t.Fatalf("SetPause = %+v, %v", p1, err)
	}
	if _, err := pub.SetPause(ctx, "p", true, "carol"); !errors.Is(err, ErrSamePause) {
		t.Fatalf("a second pause: %v, want ErrSamePause", err)
	}
	if paused, p := load(t, cfg).Paused("p"); !paused || p.Offset != p1.Offset || p.By != "bob" {
		t.Fatalf("Load: paused %v %+v, want %+v", paused, p, p1)
	}
	if paused, _ := load(t, cfg).Paused("q"); paused {
		t.Fatal("another processor is paused too")
	}

	r := openReader(t, cfg)
	if _, err := r.Load(ctx); err != nil {
		t.Fatal(err)
	}
	type pev struct {
		p   Pause
		err error
	}
	pauses := make(chan pev, 10)
	fctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- r.FollowAll(fctx, Handlers{Pause: func(p Pause, err error) { pauses <- pev{p, err} }})
	}()
	t.Cleanup(func() { cancel(); <-done })
	nextPause := func() pev {
		t.Helper()
		select {
		case ev := <-pauses:
			return ev
		case <-time.After(20 * time.Second):
			t.Fatal("no pause callback within 20s")
			return pev{}
		}
	}

	p2, err := pub.SetPause(ctx, "p", false, "carol")
	if err != nil {
		t.Fatal(err)
	}
	if ev := nextPause(); ev.err != nil || ev.p.Paused || ev.p.Offset != p2.Offset || ev.p.By != "carol" {
		t.Fatalf("follow: %+v, want the resume %+v", ev, p2)
	}
	// Another tool's records: garbage, a newer format, a tombstone.
	b.Produce(t,
		&kgo.Record{Topic: cfg.Topic, Key: []byte("pause/p"), Value: []byte("{not json")},
		&kgo.Record{Topic: cfg.Topic, Key: []byte("pause/p"), Value: []byte(`{"format":2,"processor":"p","paused":true}`)},
		&kgo.Record{Topic: cfg.Topic, Key: []byte("pause/p"), Value: []byte(`{"format":1,"processor":"x","paused":true}`)},
	)
	for _, want := range []error{ErrCorrupt, ErrFormat, ErrCorrupt} {
		if ev := nextPause(); !errors.Is(ev.err, want) || ev.p.Processor != "p" {
			t.Fatalf("follow: %+v, want %v for p", ev, want)
		}
	}
	if paused, _ := load(t, cfg).Paused("p"); paused {
		t.Fatal("undecodable pause records changed the processor's pause")
	}
	if _, err := pub.SetPause(ctx, "p", true, "dave"); err != nil {
		t.Fatal(err)
	}
	if ev := nextPause(); !ev.p.Paused {
		t.Fatalf("follow: %+v, want a pause", ev)
	}
	b.Produce(t, &kgo.Record{Topic: cfg.Topic, Key: []byte("pause/p")}) // tombstone
	if ev := nextPause(); ev.err != nil || ev.p.Paused {
		t.Fatalf("follow of a tombstone: %+v, want not paused", ev)
	}
	if paused, _ := load(t, cfg).Paused("p"); paused {
		t.Fatal("a tombstone left the processor paused")
	}
}
