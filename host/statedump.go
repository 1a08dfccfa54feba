package host

import (
	"errors"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

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
// without Kafka and without writing to it, for debugging: the global
// tables' database there and the database of each processor in it
// (Config.ProcessorStateDir). It holds the directories' locks until Close,
// so a host cannot start on them meanwhile.
type StateReader struct {
	dir  string
	root *state.Reader
	// procs are the processors' databases, by processor name.
	procs map[string]*state.Reader
}

// OpenStateReadOnly opens the state directory dir (usually
// cfg.StateDir()) read-only. log receives Pebble's messages; nil discards
// them. Errors match ErrNoState, ErrStateInUse or ErrStateCorrupt, or are
// file system errors.
func OpenStateReadOnly(dir string, log *slog.Logger) (_ *StateReader, err error) {
	root, err := state.OpenReadOnly(dir, log)
	if err != nil {
		return nil, err
	}
	s := &StateReader{dir: dir, root: root, procs: map[string]*state.Reader{}}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), processorDirPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		r, err := state.OpenReadOnly(filepath.Join(dir, e.Name()), log)
		if errors.Is(err, state.ErrNoDatabase) {
			continue
		}
		if err != nil {
			return nil, err
		}
		s.procs[name] = r
	}
	return s, nil
}

// Dir is the directory read.
func (s *StateReader) Dir() string { return s.dir }

// Stores lists every task store in the directory with its changelog
// checkpoint, sorted by processor, partition and store.
func (s *StateReader) Stores() ([]StateStore, error) {
	var out []StateStore
	for _, r := range s.readers() {
		infos, err := r.Stores()
		if err != nil {
			return nil, err
		}
		for _, in := range infos {
			out = append(out, stateStore(in))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Processor != b.Processor {
			return a.Processor < b.Processor
		}
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		return a.Store < b.Store
	})
	return out, nil
}

// readers are the databases read: the root's, then the processors'.
func (s *StateReader) readers() []*state.Reader {
	out := []*state.Reader{s.root}
	for _, name := range slices.Sorted(maps.Keys(s.procs)) {
		out = append(out, s.procs[name])
	}
	return out
}

// Scan calls fn with every key and value of store of the task processor on
// partition, in key order; key and value are valid only during the call.
// An error from fn stops the scan and is returned. A task or store that is
// not in the directory has no keys.
func (s *StateReader) Scan(processor string, partition int32, store string, fn func(key, value []byte) error) error {
	r := s.procs[processor]
	if r == nil {
		r = s.root // a directory an earlier release wrote
	}
	return r.Scan(processor, partition, store, fn)
}

// Close releases the directories. Idempotent.
func (s *StateReader) Close() error {
	var errs []error
	for _, r := range s.readers() {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}

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
