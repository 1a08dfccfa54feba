package engine

import (
	"bytes"
	"context"
	"fmt"
	"hash/maphash"
	"slices"

	"github.com/tetratelabs/wazero/api"
)

// Re-instantiation off the record path (RATIONALE.md, "A trapped
// instance is replaced from a snapshot of its init").
//
// A trap, a timeout, the memory limit or an ABI misuse discards the
// instance; the next record needs a fresh one. Running the module's init
// again for it put the init on the record path: an init of 8 s made every
// record after a trap wait 8 s, where record_timeout is 1 s. Instead, when
// an instance has started (its start function, _initialize, wasmstream_init
// and first wasmstream_input have run), the engine keeps what they left:
// its linear memory, its mutable globals (the instrumentation exports them:
// instrument.go), its WASI clocks and random state and its input buffer. A
// replacement is a new instantiation of the compiled module (no guest code
// runs) into which the snapshot is copied: what a fresh init would have
// left, since everything an init sees is deterministic (the sandbox's
// clocks and random source, the binding's config and names; init may not
// touch state, time or outputs).
//
// What a snapshot cannot hold is a table: a module with an instruction
// that changes one (table.set, table.grow, table.fill, table.copy,
// table.init) is not snapshotted, and its replacement runs init again, on
// the record path, under the init budget, as before.
//
// Snapshots are shared: every instance of a module whose init left the
// same bytes (every task of a processor version, as a rule) holds one
// copy, released with the last of them.

// snapshot is an instance as its start left it.
type snapshot struct {
	hash         uint64
	mem          []byte
	globals      []uint64
	sandbox      *sandboxState // never read or written: restore clones it
	rng          []byte        // sandbox.rng's state, to compare snapshots
	inPtr, inCap uint32
	refs         int // instances holding it; under Module.mu
}

// snapshotSeed hashes snapshots for sharing (a hash match is then compared
// byte for byte).
var snapshotSeed = maphash.MakeSeed()

// takeSnapshot is the snapshot of l, which has just started: a shared copy
// if the module holds an equal one. Called by the instance's goroutine
// after its start; nil if the module cannot be snapshotted.
func (m *Module) takeSnapshot(l *live) *snapshot {
	if m.snapshotGlobals < 0 {
		return nil
	}
	mem, ok := l.mem.Read(0, l.mem.Size())
	if !ok {
		return nil
	}
	s := &snapshot{sandbox: l.sandbox.clone(), inPtr: l.inPtr, inCap: l.inCap}
	s.rng, _ = s.sandbox.rng.MarshalBinary()
	for _, g := range l.globals {
		s.globals = append(s.globals, g.Get())
	}
	var h maphash.Hash
	h.SetSeed(snapshotSeed)
	_, _ = h.Write(mem)
	s.hash = h.Sum64()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range m.snaps {
		if o.hash == s.hash && o.inPtr == s.inPtr && o.inCap == s.inCap &&
			o.sandbox.wall == s.sandbox.wall && o.sandbox.mono == s.sandbox.mono &&
			bytes.Equal(o.rng, s.rng) && slices.Equal(o.globals, s.globals) && bytes.Equal(o.mem, mem) {
			o.refs++
			return o
		}
	}
	if acct := m.rt.opts.Snapshots; acct != nil {
		if err := acct.ChargeMemory(int64(len(mem))); err != nil {
			return nil // replacements run init again
		}
	}
	s.mem = bytes.Clone(mem)
	s.refs = 1
	m.snaps = append(m.snaps, s)
	m.snapBytes.Add(int64(len(s.mem)))
	m.rt.snapshots.Add(int64(len(s.mem)))
	return s
}

// dropSnapshot releases an instance's hold on s.
func (m *Module) dropSnapshot(s *snapshot) {
	if s == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s.refs--; s.refs > 0 {
		return
	}
	m.snaps = slices.DeleteFunc(m.snaps, func(o *snapshot) bool { return o == s })
	m.snapBytes.Add(-int64(len(s.mem)))
	m.rt.snapshots.Add(-int64(len(s.mem)))
	if acct := m.rt.opts.Snapshots; acct != nil {
		acct.ReleaseMemory(int64(len(s.mem)))
	}
}

// SnapshotBytes is the memory the module's snapshots hold (each shared
// one once).
func (m *Module) SnapshotBytes() int64 { return m.snapBytes.Load() }

// restore makes the instance live again from its snapshot: a new
// instantiation (no guest code runs) with the snapshot's memory, globals,
// sandbox state and input buffer.
func (i *Instance) restore(ctx context.Context) error {
	s := i.snap
	l, err := i.instantiate(ctx, s.sandbox.clone())
	if err != nil {
		return err
	}
	fail := func(msg string) error {
		i.discard(ctx)
		return i.m.err(InstantiateFailed, "restoring the instance after its init: "+msg, l.lm.refused)
	}
	if size := uint64(l.mem.Size()); size < uint64(len(s.mem)) {
		if _, ok := l.mem.Grow(uint32((uint64(len(s.mem)) - size) / PageSize)); !ok {
			return fail(fmt.Sprintf("memory cannot grow back to %d bytes", len(s.mem)))
		}
	}
	if uint64(l.mem.Size()) != uint64(len(s.mem)) || !l.mem.Write(0, s.mem) {
		return fail(fmt.Sprintf("memory of %d bytes where the snapshot has %d", l.mem.Size(), len(s.mem)))
	}
	for k, g := range l.globals {
		g.Set(s.globals[k])
	}
	l.inPtr, l.inCap = s.inPtr, s.inCap
	return nil
}

// snapshotGlobalsOf returns the module's exported mutable globals (see
// instrument.go) of an instantiation, or ok == false if one is missing.
func snapshotGlobalsOf(mod api.Module, n int) (globals []api.MutableGlobal, ok bool) {
	for k := range n {
		g, ok := mod.ExportedGlobal(exportGlobalName(k)).(api.MutableGlobal)
		if !ok {
			return nil, false
		}
		globals = append(globals, g)
	}
	return globals, true
}
