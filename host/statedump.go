package host

import (
	"log/slog"

	"github.com/wasmstream/wasmstream/host/internal/runner"
	"github.com/wasmstream/wasmstream/host/internal/state"
)

// Errors of OpenStateReadOnly. Test with errors.Is.
var (
	// ErrStateInUse: a running host (this process's or another's) has the
	// state directory open; Pebble allows one user at a time.
	ErrStateInUse = state.ErrLocked
	// ErrNoState: the directory does not exist or holds no state database.
	ErrNoState = state.ErrNoDatabase
	// ErrStateCorrupt: damaged files or a key layout this version does not
	// read.
	ErrStateCorrupt = state.ErrCorrupt
)

// StateReader reads an app's local state directory (Config.StateDir)
// without Kafka and without writing to it, for debugging. It holds the
// directory lock until Close, so a host cannot start on the directory
// meanwhile.
type StateReader struct {
	r *state.Reader
}

// OpenStateReadOnly opens the state directory dir (usually
// cfg.StateDir()) read-only. log receives Pebble's messages; nil discards
// them. Errors match ErrNoState, ErrStateInUse or ErrStateCorrupt, or are
// file system errors.
func OpenStateReadOnly(dir string, log *slog.Logger) (*StateReader, error) {
	r, err := state.OpenReadOnly(dir, log)
	if err != nil {
		return nil, err
	}
	return &StateReader{r: r}, nil
}

// Dir is the directory read.
func (s *StateReader) Dir() string { return s.r.Dir() }

// Stores lists every task store in the directory with its changelog
// checkpoint, sorted by processor, partition and store.
func (s *StateReader) Stores() ([]StateStore, error) {
	infos, err := s.r.Stores()
	if err != nil {
		return nil, err
	}
	out := make([]StateStore, len(infos))
	for i, in := range infos {
		out[i] = stateStore(in)
	}
	return out, nil
}

// Scan calls fn with every key and value of store of the task processor on
// partition, in key order; key and value are valid only during the call.
// An error from fn stops the scan and is returned. A task or store that is
// not in the directory has no keys.
func (s *StateReader) Scan(processor string, partition int32, store string, fn func(key, value []byte) error) error {
	return s.r.Scan(processor, partition, store, fn)
}

// Close releases the directory. Idempotent.
func (s *StateReader) Close() error { return s.r.Close() }

// TaskName is the name of the task of processor on partition as the host
// names it everywhere (logs, metrics, /v1/processors): processor/topic/
// partition, the topic being the processor's first input (a repartition
// input by its internal topic). "" for a processor the config lacks.
func (c *Config) TaskName(processor string, partition int32) string {
	for i := range c.Processors {
		if p := &c.Processors[i]; p.Name == processor {
			inputs := c.runnerInputs(p)
			if len(inputs) == 0 {
				return ""
			}
			// The runner names a task by the input partition it was
			// assigned, and a co-partitioned one (several inputs) by its
			// first input: a task with state always has that name.
			return runner.TaskID{Processor: processor, Topic: inputs[0], Partition: partition}.String()
		}
	}
	return ""
}
