package host

import (
	"context"
	"fmt"

	"github.com/wasmstream/wasmstream/host/internal/globaltable"
	"github.com/wasmstream/wasmstream/host/internal/plugin"
)

// makeTables makes one global table per topic any processor reads as a
// table, and gives each processor's binding its tables in index order.
func (h *Host) makeTables() {
	h.tables = map[string]*globaltable.Table{}
	for i, p := range h.procs {
		pc := &h.cfg.Processors[i]
		if len(pc.Tables) == 0 {
			continue
		}
		var ts plugin.Tables
		for _, name := range p.Spec.Tables { // sorted: the index order
			topic := pc.Tables[name]
			t := h.tables[topic]
			if t == nil {
				t = globaltable.New(globaltable.Config{Kafka: h.kafka, Topic: topic,
					Store: h.state.Table(topic), Logger: h.log})
				h.tables[topic] = t
			}
			ts = append(ts, t)
		}
		p.Binding.TableState = ts
	}
}

// loadTables reads every table up to the end offsets of its topic listed
// now, then keeps each one following its topic on a goroutine of its own
// until ctx ends; done is closed when they all have returned. Tasks
// process no record before loadTables returns.
func (h *Host) loadTables(ctx context.Context, done chan<- struct{}) error {
	type result struct {
		t   *globaltable.Table
		err error
	}
	loaded := make(chan result, len(h.tables))
	for _, t := range h.tables {
		go func() { loaded <- result{t, t.Bootstrap(ctx)} }()
	}
	var first error
	for range h.tables {
		if r := <-loaded; r.err != nil && first == nil {
			first = fmt.Errorf("global table %s: %w", r.t.Topic(), r.err)
		}
	}
	if first != nil {
		close(done)
		return first
	}
	followed := make(chan struct{}, len(h.tables))
	for _, t := range h.tables {
		go func() {
			defer func() { followed <- struct{}{} }()
			if err := t.Follow(ctx); err != nil {
				h.log.Error("global table stopped following its topic; lookups see it as it was", "table", t.Topic(), "err", err)
			}
		}()
	}
	go func() {
		for range h.tables {
			<-followed
		}
		close(done)
	}()
	return nil
}

// tablesLoading is how many tables have not finished loading.
func (h *Host) tablesLoading() int {
	n := 0
	for _, t := range h.tables {
		if !t.Ready() {
			n++
		}
	}
	return n
}
