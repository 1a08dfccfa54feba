package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// The floor counts exactly, under both guarantees and in both emit modes:
// its output passes the harness's check, one record per word occurrence
// per update, fewer per commit; its group commits all input and leaves
// nothing in its repartition topic, so the harness sees it done.
func TestFloorCountsExactly(t *testing.T) {
	for _, g := range []string{ExactlyOnce, AtLeastOnce} {
		for _, emit := range []FloorEmit{FloorPerUpdate, FloorPerCommit} {
			t.Run(g+"/"+string(emit), func(t *testing.T) {
				b := testbroker.New(t)
				adm := b.Admin(t)
				ctx := context.Background()
				spec := InputSpec{Lines: 3000, Words: 5, Partitions: 3, Vocab: 400, ZipfS: 1, Seed: 3, Layout: LayoutAny}
				in := b.Name(t, "in")
				if err := createTopic(ctx, adm, in, spec.Partitions); err != nil {
					t.Fatal(err)
				}
				gen, err := NewGenerator(spec)
				if err != nil {
					t.Fatal(err)
				}
				ends, _, err := produceInput(ctx, b.Addrs(), in, gen, 0, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				o := floorOptions{Brokers: b.Addrs(), AppID: b.Name(t, "floor"), Input: in, Output: b.Name(t, "out"),
					Guarantee: g, CommitInterval: 10 * time.Millisecond, Partitions: spec.Partitions, Emit: emit}
				if err := createTopic(ctx, adm, o.Output, spec.Partitions); err != nil {
					t.Fatal(err)
				}
				fctx, stop := context.WithCancel(ctx)
				errc := make(chan error, 1)
				go func() { errc <- runFloor(fctx, o) }()

				// Done as the harness's check proves it: every word's latest
				// count is its true count, read with read_committed.
				var out *Output
				testutil.Eventually(t, 90*time.Second, func() error {
					select {
					case err := <-errc:
						t.Fatalf("the floor stopped: %v", err)
					default:
					}
					if out, err = readOutput(ctx, b.Addrs(), o.Output, 30*time.Second); err != nil {
						return err
					}
					return out.Check(gen.Truth())
				})
				// And as the harness's sampling sees it: all input
				// committed, the repartition topic consumed to its end.
				w := &Watch{Adm: adm, Group: o.AppID, Input: in, InputEnds: ends, Output: o.Output, Prefix: o.AppID + "-"}
				testutil.Eventually(t, 30*time.Second, func() error {
					s, err := w.Sample(ctx)
					if err != nil {
						return err
					}
					if s.InputLag != 0 || s.Backlog != 0 {
						return fmt.Errorf("not done: %s", s)
					}
					return nil
				})
				stop()
				if err := <-errc; err != nil {
					t.Fatalf("runFloor: %v", err)
				}
				occurrences := int64(spec.Lines * spec.Words)
				switch {
				case emit == FloorPerUpdate && out.Records != occurrences:
					t.Fatalf("%d outputs, want one per word occurrence (%d)", out.Records, occurrences)
				case emit == FloorPerCommit && out.Records >= occurrences:
					t.Fatalf("%d outputs per commit, want fewer than the %d occurrences", out.Records, occurrences)
				}
				topics, err := adm.ListTopics(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if !topics.Has(o.repartitionTopic()) || !topics.Has(o.changelogTopic()) {
					t.Fatalf("internal topics %s, %s missing: %v", o.repartitionTopic(), o.changelogTopic(), topics.Names())
				}
			})
		}
	}
}

// The counts of a window that aborts are dropped, those of one that
// commits kept; per update every count goes out at once, per commit the
// latest of each word at the window's end; each to the output and to the
// changelog partition of the task that counted it.
func TestFloorCounterWindows(t *testing.T) {
	for _, emit := range []FloorEmit{FloorPerUpdate, FloorPerCommit} {
		t.Run(string(emit), func(t *testing.T) {
			o := floorOptions{AppID: "app", Input: "in", Output: "out", Partitions: 4, Emit: emit}
			f := newFloorCounter(o)
			var got []string
			produce := func(_ context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
				v := string(r.Value)
				if r.Topic != o.repartitionTopic() {
					v = fmt.Sprint(binary.BigEndian.Uint64(r.Value))
				}
				got = append(got, fmt.Sprintf("%s/%d %s=%s", r.Topic, r.Partition, r.Key, v))
				promise(r, nil)
			}
			word := func(p int32, w string) *kgo.Record {
				return &kgo.Record{Topic: o.repartitionTopic(), Partition: p, Key: []byte(w), Value: []byte(w)}
			}
			window := func(committed bool, recs ...*kgo.Record) string {
				got = nil
				for _, r := range recs {
					f.process(r, produce)
				}
				f.flushWindow(produce)
				f.endWindow(committed)
				sort.Strings(got)
				return strings.Join(got, " ")
			}
			pa, pb := floorPartition([]byte("a"), 4), floorPartition([]byte("b"), 4)
			lines := window(true, &kgo.Record{Topic: "in", Value: []byte("A b")})
			if want := fmt.Sprintf("app-words-repartition/%d a=a app-words-repartition/%d b=b", pa, pb); lines != want {
				t.Fatalf("a line: %q, want %q", lines, want)
			}
			want := map[FloorEmit]string{
				FloorPerUpdate: fmt.Sprintf("app-counts-changelog/2 a=1 app-counts-changelog/2 a=2 out/%d a=1 out/%d a=2", pa, pa),
				FloorPerCommit: fmt.Sprintf("app-counts-changelog/2 a=2 out/%d a=2", pa),
			}[emit]
			if got := window(false, word(2, "a"), word(2, "a")); got != want {
				t.Fatalf("an aborted window: %q, want %q", got, want)
			}
			// The abort dropped a's counts: counted again from 0.
			if got := window(true, word(2, "a"), word(2, "a")); got != want {
				t.Fatalf("the window again: %q, want %q", got, want)
			}
			want = map[FloorEmit]string{
				FloorPerUpdate: fmt.Sprintf("app-counts-changelog/1 a=3 out/%d a=3", pa),
				FloorPerCommit: fmt.Sprintf("app-counts-changelog/1 a=3 out/%d a=3", pa),
			}[emit]
			if got := window(true, word(1, "a")); got != want {
				t.Fatalf("after a commit: %q, want %q", got, want)
			}
			if err := f.produceErr(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestForEachWord(t *testing.T) {
	var got []string
	forEachWord([]byte("The cat,  the HAT;don't 42x "), func(w []byte) { got = append(got, string(w)) })
	if s := strings.Join(got, " "); s != "the cat the hat don t 42x" {
		t.Fatalf("words %q", s)
	}
}

func TestFloorFlags(t *testing.T) {
	var stderr strings.Builder
	if code := floorMain(context.Background(), []string{"-app-id", "a", "-input", "i", "-output", "o", "-emit", "sometimes"}, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), `-emit "sometimes"`) {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	stderr.Reset()
	if code := floorMain(context.Background(), []string{"-input", "i"}, &stderr); code != 2 || !strings.Contains(stderr.String(), "required") {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
}
