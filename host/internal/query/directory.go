package query

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/wasmstream/wasmstream/host/internal/control"
)

// Directory is where each task is, as the control topic's member records
// say (control/member.go): filled from the records Load read, then as
// they come. A task two records claim (one of a process killed before it
// wrote its tombstone) is the one of the later record. Safe for
// concurrent use.
type Directory struct {
	mu      sync.Mutex
	members map[string]control.Member
}

// NewDirectory returns a Directory holding ms.
func NewDirectory(ms []control.Member) *Directory {
	d := &Directory{members: map[string]control.Member{}}
	for _, m := range ms {
		d.Apply(m)
	}
	return d
}

// Apply takes one member record (a tombstone removes the member).
func (d *Directory) Apply(m control.Member) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if m.Gone {
		delete(d.members, m.Member)
		return
	}
	d.members[m.Member] = m
}

// Owner returns the address of the member holding processor's task on
// partition, leaving out self (this process: what it holds it knows
// better), or "" if none is known.
func (d *Directory) Owner(processor string, partition int32, self string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var best control.Member
	for name, m := range d.members {
		if name == self || !slices.Contains(m.Tasks[processor], partition) {
			continue
		}
		if best.Member == "" || m.At.After(best.At) {
			best = m
		}
	}
	return best.Address
}

// Advertise publishes this process's member record (member, address, the
// tasks tasks returns) whenever the tasks change, checking every interval,
// until ctx ends; then it writes the member's tombstone. A failed publish
// is logged and tried again at the next check.
func Advertise(ctx context.Context, pub *control.Publisher, member, address string, tasks func() map[string][]int32,
	interval time.Duration, log *slog.Logger) {
	var last map[string][]int32
	published := false
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		now := tasks()
		if !published || !maps.EqualFunc(now, last, slices.Equal[[]int32]) {
			pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := pub.PublishMember(pctx, control.Member{Member: member, Address: address, Tasks: now})
			cancel()
			if err == nil {
				last, published = now, true
			} else if ctx.Err() == nil {
				log.Warn("query: publishing this process's tasks to the control topic; retrying", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			tctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := pub.PublishMember(tctx, control.Member{Member: member, Gone: true}); err != nil {
				log.Warn("query: removing this process's member record from the control topic", "err", err)
			}
			cancel()
			return
		case <-tick.C:
		}
	}
}
