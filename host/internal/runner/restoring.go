package runner

import (
	"context"
	"errors"
	"sort"
	"sync"

	"github.com/wasmstream/wasmstream/host/internal/restore"
)

// restoreState is a stateful task's restore in flight. The restore runs on
// its own goroutine with its own client; the partition's fetching stays
// paused until it is done, so no input record of the task is fetched, let
// alone processed, before its state is complete (I4). Other tasks go on.
type restoreState struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the restore goroutine returns
	err    error         // valid after done
}

// startRestore pauses the task's input partitions and restores its stores
// in the background. Called from the poll loop or a group callback.
func (r *Runner) startRestore(t *task) {
	r.cl.PauseFetchPartitions(t.partitions())
	ctx, cancel := context.WithCancel(context.Background())
	rs := &restoreState{cancel: cancel, done: make(chan struct{})}
	t.restoring = rs
	r.progress.begin()
	go func() {
		defer func() {
			r.progress.end()
			close(rs.done)
			select { // end the poll so the loop starts the task
			case r.wake <- struct{}{}:
			default:
			}
		}()
		// At most MaxRestores restores run at once: each holds a client,
		// its fetch buffers and a batch of up to the restore's byte bound,
		// and they all compete for the same cores and the same Pebble.
		select {
		case r.restoreSlots <- struct{}{}:
			defer func() { <-r.restoreSlots }()
		case <-ctx.Done():
			rs.err = ctx.Err()
			return
		}
		_, rs.err = r.restorer.RestoreTask(ctx, t.st, t.proc.spec.Changelogs, t.id.Partition)
	}()
}

// finishRestores starts the tasks whose restore finished: their partition
// is resumed from the committed offset. A failed restore stops the task,
// like a failed record under on_error: fail, and its partition stays
// paused: nothing of it is processed on incomplete state.
func (r *Runner) finishRestores() {
	for _, t := range r.tasks {
		rs := t.restoring
		if rs == nil {
			continue
		}
		select {
		case <-rs.done:
		default:
			continue
		}
		t.restoring = nil
		if rs.err != nil {
			t.stop(rs.err)
			r.log.Error("restoring the task's state failed; the task is stopped", "task", t.id.String(), "err", rs.err)
			continue
		}
		r.cl.ResumeFetchPartitions(t.partitions())
		r.log.Info("task state restored; processing starts", "task", t.id.String())
	}
}

// stopRestore cancels a task's restore and waits for it to end, so the
// task's state handle is no longer used when the task closes.
func (t *task) stopRestore() {
	rs := t.restoring
	if rs == nil {
		return
	}
	rs.cancel()
	<-rs.done
	t.restoring = nil
	if rs.err != nil && !errors.Is(rs.err, context.Canceled) {
		t.r.log.Warn("restore ended with an error while the task closed", "task", t.id.String(), "err", rs.err)
	}
}

// restoreProgress keeps the latest progress of every restore, for metrics,
// readiness and progress bars.
type restoreProgress struct {
	mu      sync.Mutex
	running int
	latest  map[string]restore.Progress // by task/store
}

func (p *restoreProgress) begin() { p.mu.Lock(); p.running++; p.mu.Unlock() }
func (p *restoreProgress) end()   { p.mu.Lock(); p.running--; p.mu.Unlock() }

func (p *restoreProgress) active() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running
}

func (p *restoreProgress) update(pr restore.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.latest == nil {
		p.latest = map[string]restore.Progress{}
	}
	p.latest[pr.Task+"/"+pr.Store] = pr
}

func (p *restoreProgress) snapshot() []restore.Progress {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]restore.Progress, 0, len(p.latest))
	for _, pr := range p.latest {
		out = append(out, pr)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Task != out[j].Task {
			return out[i].Task < out[j].Task
		}
		return out[i].Store < out[j].Store
	})
	return out
}
