package host

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/wasmstream/wasmstream/host/internal/state"
)

// The embedded development broker (kafka.brokers empty) is franz-go's
// kfake, in this process: it keeps nothing when the process ends. Every
// run starts on a broker with no topics, records, committed offsets or
// changelogs, so local state left by an earlier run describes records
// that no longer exist. The host says so once at startup and clears that
// state before any task starts, rather than letting each task's restore
// find its checkpoint beyond an empty changelog and warn that it wipes
// the task, which is right for a real cluster (a recreated topic) and
// only noise here.

// startEmbedded starts the in-process development broker on 127.0.0.1.
func (h *Host) startEmbedded(port int) error {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.DefaultNumPartitions(h.cfg.Kafka.TopicPartitions),
		// Members hear of a rebalance within a second (default 5 s).
		kfake.BrokerConfigs(map[string]string{"group.consumer.heartbeat.interval.ms": "1000"}))
	if err != nil {
		return fmt.Errorf("embedded kafka: %w", err)
	}
	h.embedded = c
	h.brokers = c.ListenAddrs()
	h.log.Warn("no kafka.brokers configured: started an embedded in-process Kafka for development only. "+
		"It keeps nothing between runs: each run starts with no topics, records or offsets, and the stores' state is rebuilt from what this run processes",
		"address", strings.Join(h.brokers, ","))
	return nil
}

// staleTasks lists the task stores an earlier run left in dir; none when
// there is no database (or it cannot be read now: state.Open says why).
func staleTasks(dir string) []state.StoreInfo {
	r, err := state.OpenReadOnly(dir, nil)
	if err != nil {
		return nil
	}
	defer r.Close()
	stores, _ := r.Stores()
	return stores
}

// clearEmbeddedState wipes the tasks an earlier run left in each
// processor's database (stale, by processor) and the app's global tables:
// with the embedded broker their changelogs, topics and offsets went with
// the earlier run's broker.
func (h *Host) clearEmbeddedState(stale map[string][]state.StoreInfo) error {
	tasks := 0
	for name, infos := range stale {
		n, err := wipeTasks(h.procState[name], infos)
		if err != nil {
			return fmt.Errorf("state.dir: clearing the state of an earlier run on the embedded broker: %w", err)
		}
		tasks += n
	}
	tables := 0
	for _, p := range h.cfg.Processors {
		for _, topic := range p.Tables {
			t := h.state.Table(topic)
			cps, err := t.Checkpoints()
			if err == nil && len(cps) > 0 {
				err = t.Wipe()
				tables++
			}
			if err != nil {
				return fmt.Errorf("state.dir: clearing global table %s of an earlier run on the embedded broker: %w", topic, err)
			}
		}
	}
	if tasks+tables > 0 {
		h.log.Info("embedded broker: cleared the local state of an earlier run; its topics and changelogs went with that run's broker, "+
			"and the stores are rebuilt from the records this run processes", "tasks", tasks, "global_tables", tables, "dir", h.cfg.StateDir())
	}
	return nil
}

// wipeTasks wipes the tasks of stores in db and returns how many.
func wipeTasks(db *state.DB, stores []state.StoreInfo) (int, error) {
	type taskKey struct {
		processor string
		partition int32
	}
	seen := map[taskKey]bool{}
	for _, s := range stores {
		k := taskKey{s.Processor, s.Partition}
		if seen[k] {
			continue
		}
		seen[k] = true
		t := db.Task(k.processor, k.partition, nil)
		err := t.Wipe()
		_ = t.Close()
		if err != nil {
			return len(seen), err
		}
	}
	return len(seen), nil
}
