package runner

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

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
		// A dead former owner's open transaction is fenced meanwhile
		// (fence.go): until it ends, the task could not start after
		// its restore anyway.
		fenced := make(chan struct{})
		go func() {
			defer close(fenced)
			r.fenceAbandoned(ctx, t)
		}()
		defer func() { <-fenced }()
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
		until, err := r.tableTargets(ctx, t)
		if err != nil {
			rs.err = err
			return
		}
		_, rs.err = r.restorer.RestoreTask(ctx, t.st, t.proc.spec.Changelogs, until, t.id.Partition)
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

// tableTargets are the restore targets of the task's stores (nil: every
// store to its changelog's end): a task table stops at the group's
// committed offset of its partition, or restores nothing when none is
// committed. What lies past the committed offset the task reads again as
// input, in order with its other inputs, so a lookup never sees the table
// ahead of the records it is processed with. The committed offset is read
// stable: a transaction of the partition's previous owner that is still
// open is waited for.
func (r *Runner) tableTargets(ctx context.Context, t *task) ([]int64, error) {
	if len(t.proc.spec.TaskTables) == 0 {
		return nil, nil
	}
	until := make([]int64, len(t.proc.spec.Stores))
	for i := range until {
		until[i] = -1
	}
	adm := kadm.NewClient(r.cl)
	for attempt := 0; ; attempt++ {
		offs, err := adm.FetchOffsets(kadm.RequireStable(ctx), r.opts.AppID)
		if err == nil {
			err = offs.Error()
		}
		if err == nil {
			for _, tt := range t.proc.spec.TaskTables {
				until[tt.Store] = 0 // nothing committed: the log start
				if o, ok := offs.Lookup(tt.Topic, t.id.Partition); ok && o.At >= 0 {
					until[tt.Store] = o.At
				}
			}
			return until, nil
		}
		if ctx.Err() != nil || attempt >= 50 {
			return nil, fmt.Errorf("task %s: reading the committed offsets of its tables: %w", t.id, err)
		}
		r.log.Info("reading the committed offsets of a task's tables; retrying", "task", t.id.String(), "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
