package runner

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/internal/testutil"
)

// TestManualCommits: with ManualCommits a runner processes records and
// commits them only when CommitNow asks; CommitNow returns once the
// offsets are committed; Progress says where each task stands; a stopped
// runner answers ErrStopped.
func TestManualCommits(t *testing.T) {
	for _, eos := range []bool{true, false} {
		t.Run(guarantee(eos).String(), func(t *testing.T) {
			f := newFixture(t, eos, 2)
			f.produceInputs(t, 0, 20)
			ends := f.endOffsets(t, f.in)
			r := f.runnerWith(t, &goPlugin{}, Fail, func(o *Options) { o.ManualCommits = true })
			stop := start(t, r)
			testutil.Eventually(t, 60*time.Second, func() error {
				ps := r.Progress()
				for _, p := range ps {
					if !p.Reached(ends[p.Partition]) {
						return fmt.Errorf("partition %d: fetched to %d of %d", p.Partition, p.Fetched, ends[p.Partition])
					}
				}
				if len(ps) != len(ends) {
					return fmt.Errorf("%d tasks, want %d", len(ps), len(ends))
				}
				return nil
			})
			if !r.Uncommitted() {
				t.Error("records processed, and Uncommitted is false")
			}
			if got := f.committed(t, f.in); len(got) != 0 {
				t.Errorf("committed %v before CommitNow", got)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := r.CommitNow(ctx); err != nil {
				t.Fatal(err)
			}
			if got := f.committed(t, f.in); !equalOffsets(got, ends, false) {
				t.Errorf("committed %v after CommitNow, want %v", got, ends)
			}
			if r.Uncommitted() || r.Buffered() != 0 {
				t.Errorf("after CommitNow: uncommitted %t, buffered %d", r.Uncommitted(), r.Buffered())
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if err := r.CommitNow(ctx); !errors.Is(err, ErrStopped) {
				t.Errorf("CommitNow on a stopped runner: %v, want ErrStopped", err)
			}
		})
	}
}
