// Package sdktest is an in-process fake of the wasmstream host, so a plugin
// written with package sdk is unit-tested with plain `go test`: no Wasm, no
// Kafka.
//
//	h := sdktest.New(t, sdktest.Outputs("enriched", "errors"),
//		sdktest.Stores("counts"), sdktest.Config(`{"field":"x"}`))
//	res := h.Process(sdktest.Record{Key: []byte("k"), Value: []byte(`{"x":1}`)})
//	if res.Err != nil { ... }          // the text the plugin gave set_error
//	res.Emitted["enriched"]            // what was emitted, per output
//	h.State("counts").Get("k")         // committed state
//	h.Logs()
//
// The fake runs the handler registered with sdk.Handle through the same SDK
// code as a Wasm build: each record is encoded in the ABI record layout,
// written into the buffer the SDK hands out (wasmstream_input) and processed
// by the body of the wasmstream_process export; every host call crosses the
// same functions. It keeps the host's semantics from abi/ABI.md: outputs
// and stores must be declared (ENONAME, ENOOUTPUT); emit and state are
// refused during init (EPHASE); keys, values and records have the abi
// limits; null and empty stay distinct; reads see the record's own staged
// writes; scans are in byte order; a failed record's emits and state
// writes are discarded as a whole; the plugin's set_error text becomes the
// record's error.
//
// Time (package sdk/timer, ABI.md section 8) is faked too: the stream
// time follows the records' timestamps, the wall clock moves when the test
// says (SetWallTime, AdvanceWallTime), due timers fire after records and
// at commit points (Commit), and commit callbacks run at commit points;
// see time.go for the exact rules.
//
// The SDK keeps per-instance state in package variables, so only one Host is
// active at a time: New waits while another test's Host is active (tests
// that call t.Parallel are serialized here), and a Host created in the same
// test or a subtest replaces the one before it. New starts each Host as a
// fresh instance (cached output and store indices and config are
// forgotten) but the plugin's own package variables carry over between
// Hosts: a plugin that parses its config in an OnInit hook must assign all
// of its settings there, not add to them.
//
// sdktest imports only the standard library, abi and sdk (including the
// SDK's internal seam to it, sdk/internal/fakeabi).
package sdktest

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/sdk"
	"github.com/wasmstream/wasmstream/sdk/internal/fakeabi"
)

// Option configures a Host, the way the processor's entry in the host's
// config file does.
type Option func(*options)

type options struct {
	outputs []string
	stores  []string
	config  []byte
	fault   func(call string) abi.Errno
	time    timeOptions
}

// Outputs declares the processor's outputs. Indices are given in sorted
// name order, as the host does.
func Outputs(names ...string) Option {
	return func(o *options) { o.outputs = append(o.outputs, names...) }
}

// Stores declares the processor's state stores.
func Stores(names ...string) Option {
	return func(o *options) { o.stores = append(o.stores, names...) }
}

// Config sets the processor's config, the JSON text the config import
// returns. Without it the config is empty (length 0).
func Config(json string) Option {
	return func(o *options) { o.config = []byte(json) }
}

// Fault injects host errors: f is called before every host call with the
// import's name (abi.Import*) and returns 0 to let the call through or the
// errno to return instead. As on the real host, abi.ErrnoIO and
// abi.ErrnoFault also fail the record whatever the plugin does next.
func Fault(f func(call string) abi.Errno) Option {
	return func(o *options) { o.fault = f }
}

// Record is an input record. Nil Key or Value is null; Input is the index
// of its topic among the processor's inputs.
type Record struct {
	Key       []byte
	Value     []byte
	Headers   []abi.Header
	Timestamp int64 // milliseconds since the Unix epoch
	Partition int32
	Offset    int64
	Input     int
}

// Emitted is one record the plugin emitted. Its slices are copies.
type Emitted struct {
	Output    string
	Key       []byte
	Value     []byte
	Headers   []abi.Header
	Timestamp int64
	// Partition is abi.AnyPartition unless the plugin chose one (EmitTo).
	Partition int32
	// Raw is the exact bytes the plugin passed to emit.
	Raw []byte
}

// Result is the outcome of one record.
type Result struct {
	// Status is what the plugin's process export returned.
	Status abi.Status
	// Err is nil when the record succeeded. Otherwise its text is the
	// plugin's set_error message, or says why the host failed the record.
	Err error
	// Emitted holds the records emitted per output name, in emit order;
	// All holds them in emit order across outputs. They hold the emits of
	// every call of the step that succeeded: the record's, then those of
	// the callbacks in Callbacks. A failed call's emits are discarded, as
	// the host does.
	Emitted map[string][]Emitted
	All     []Emitted
	// Callbacks are the timer and commit callbacks the step ran, in order
	// (package sdk/timer): the timers that came due after the record, or
	// the commit point's. Err above is the record's alone; each callback
	// has its own.
	Callbacks []Callback
}

// Failed is the first error of the step: the record's, or else the first
// failed callback's; nil if every call succeeded.
func (r *Result) Failed() error {
	if r.Err != nil {
		return r.Err
	}
	for _, c := range r.Callbacks {
		if c.Err != nil {
			return errors.New("sdktest: " + c.Kind.String() + " callback for key " + strconv.Quote(string(c.Key)) +
				" at " + strconv.FormatInt(c.Time, 10) + ": " + c.Err.Error())
		}
	}
	return nil
}

// Log is one line the plugin logged.
type Log struct {
	Level sdk.Level
	Msg   string
}

type phase uint8

const (
	phaseIdle phase = iota
	phaseInit
	phaseProcess
	phaseTimer  // wasmstream_on_timer
	phaseCommit // wasmstream_on_commit
	// phaseMigrate is wasmstream_migrate: state only (emit and timers get
	// EPHASE).
	phaseMigrate
)

// Host is a fake wasmstream host running one plugin instance.
type Host struct {
	t       testing.TB
	guest   fakeabi.Guest
	outputs []string
	outIdx  map[string]int32
	stores  []*Store
	config  []byte
	fault   func(call string) abi.Errno

	phase   phase
	closed  string // why the host can no longer be used; "" while usable
	initErr error
	inBuf   []byte
	logs    []Log

	// Per record (or init).
	errMsg     string
	errSet     bool
	hostFail   error // a host call that fails the record whatever the plugin does
	emitted    []Emitted
	cursors    map[uint32]*cursor
	nextCursor uint32

	time timeState // clocks, timers, commit marks (time.go)
}

var (
	activeMu   sync.Mutex
	activeCond = sync.NewCond(&activeMu)
	active     *Host
)

// New starts a fake host and a plugin instance: it declares the options'
// outputs and stores, runs the plugin's init (the sdk.OnInit hook), and
// fails the test if init fails. The host is closed when the test ends.
func New(t testing.TB, opts ...Option) *Host {
	t.Helper()
	h, err := Start(t, opts...)
	if err != nil {
		t.Fatalf("sdktest: plugin init failed: %v", err)
	}
	return h
}

// Start is New for tests of init itself: it returns init's error (the
// plugin's set_error text) instead of failing the test. The Host is
// returned either way so its Logs can be read; processing records on a
// Host whose init failed fails the test.
func Start(t testing.TB, opts ...Option) (*Host, error) {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	h := &Host{t: t, guest: fakeabi.Entry(), config: o.config, fault: o.fault,
		outIdx: map[string]int32{}, cursors: map[uint32]*cursor{}}
	if h.guest.Process == nil {
		t.Fatal("sdktest: the sdk package did not register its entry points")
	}
	h.outputs = sortedUnique(o.outputs)
	for i, n := range h.outputs {
		h.outIdx[n] = int32(i)
	}
	for _, n := range sortedUnique(o.stores) {
		st := &Store{name: n, data: map[string][]byte{}, stamps: map[string]int64{}}
		if ttl, ok := o.time.ttls[n]; ok {
			st.ttl = ttl.ms
			st.now = h.storeClock(ttl.clock)
		}
		h.stores = append(h.stores, st)
	}
	for n := range o.time.ttls {
		if !slices.Contains(o.stores, n) {
			t.Fatalf("sdktest: StoreTTL for %q, which is not declared with Stores", n)
		}
	}

	h.initTime(o.time)
	h.activate()
	t.Cleanup(func() { h.release("the test that created it ended") })

	// The calling order of ABI.md section 3: init, then the first input
	// buffer.
	h.guest.Reset()
	h.beginCall(phaseInit)
	st := abi.Status(h.guest.Init())
	h.phase = phaseIdle
	if err := h.outcome(st); err != nil {
		h.initErr = err
		return h, err
	}
	h.inBuf = h.guest.Input(4096)
	return h, nil
}

func sortedUnique(names []string) []string {
	s := slices.Clone(names)
	slices.Sort(s)
	return slices.Compact(s)
}

// activate makes h the SDK's host, waiting for another test's host to be
// released first. A host of the same test or of an ancestor test is
// replaced instead: waiting for it would deadlock.
func (h *Host) activate() {
	activeMu.Lock()
	defer activeMu.Unlock()
	for active != nil {
		prev := active.t.Name()
		if name := h.t.Name(); name == prev || strings.HasPrefix(name, prev+"/") {
			active.closeLocked("it was replaced by a newer sdktest.New in " + name)
			break
		}
		activeCond.Wait()
	}
	active = h
	fakeabi.SetHost((*calls)(h))
}

func (h *Host) release(why string) {
	activeMu.Lock()
	defer activeMu.Unlock()
	if h.closed == "" {
		h.closeLocked(why)
	}
}

func (h *Host) closeLocked(why string) {
	h.closed = why
	if active == h {
		active = nil
		fakeabi.SetHost(nil)
		activeCond.Broadcast()
	}
}

func (h *Host) usable() {
	h.t.Helper()
	if h.closed != "" {
		h.t.Fatalf("sdktest: host used after it was closed: %s", h.closed)
	}
	if h.initErr != nil {
		h.t.Fatalf("sdktest: record processed on a host whose plugin init failed: %v", h.initErr)
	}
}

// Process runs the plugin's handler on r, after moving the stream time to
// r's timestamp; then the event-time timers the record made due fire, and,
// with CommitEvery, a commit point runs. Their callbacks are part of the
// Result.
func (h *Host) Process(r Record) Result {
	h.t.Helper()
	if r.Input < 0 {
		h.t.Fatalf("sdktest: Record.Input = %d, must be >= 0", r.Input)
	}
	rec := abi.Record{Timestamp: r.Timestamp, Offset: r.Offset, Partition: r.Partition,
		Index: uint32(r.Input), Key: r.Key, Value: r.Value, Headers: r.Headers}
	return h.ProcessRaw(rec.AppendEncode(nil))
}

// MustProcess is Process that fails the test if the record or one of the
// callbacks after it fails.
func (h *Host) MustProcess(r Record) Result {
	h.t.Helper()
	res := h.Process(r)
	if err := res.Failed(); err != nil {
		h.t.Fatalf("sdktest: record failed: %v", err)
	}
	return res
}

// ProcessRaw hands the plugin exactly the bytes encoded, as the host would
// after writing a record into its input buffer: for tests of the record
// layout itself, including malformed ones.
func (h *Host) ProcessRaw(encoded []byte) Result {
	h.t.Helper()
	h.usable()
	if len(encoded) > len(h.inBuf) {
		h.inBuf = h.guest.Input(uint32(len(encoded)))
		if len(h.inBuf) < len(encoded) {
			return h.finish(abi.StatusFailed, errors.New("sdktest: the plugin's wasmstream_input gave "+
				strconv.Itoa(len(h.inBuf))+" bytes for a "+strconv.Itoa(len(encoded))+"-byte record"))
		}
	}
	copy(h.inBuf, encoded)
	ts := h.advanceStreamTime(encoded)
	h.beginCall(phaseProcess)
	h.time.callTS = ts
	st := abi.Status(h.guest.Process(uint32(len(encoded))))
	res := h.finish(st, nil)
	h.afterRecord(&res)
	return res
}

func (h *Host) beginCall(p phase) {
	h.phase = p
	h.errMsg, h.errSet, h.hostFail = "", false, nil
	h.emitted = nil
	clear(h.cursors)
	for _, s := range h.stores {
		s.discard()
	}
	h.beginTimeCall()
}

// finish ends a record: commit its staged writes and emits if it
// succeeded, discard them if not.
func (h *Host) finish(st abi.Status, hostErr error) Result {
	h.phase = phaseIdle
	clear(h.cursors)
	if hostErr != nil {
		h.hostFail = hostErr
	}
	res := Result{Status: st, Err: h.outcome(st)}
	for _, s := range h.stores {
		if res.Err == nil {
			s.commit()
		}
		s.discard()
	}
	h.endTimeCall(res.Err == nil)
	if res.Err == nil {
		res.All = h.emitted
		res.Emitted = map[string][]Emitted{}
		for _, e := range h.emitted {
			res.Emitted[e.Output] = append(res.Emitted[e.Output], e)
		}
	}
	h.emitted = nil
	return res
}

// outcome is the error of a finished call, or nil if it succeeded.
func (h *Host) outcome(st abi.Status) error {
	switch {
	case st == abi.StatusOK && h.hostFail == nil:
		return nil
	case h.hostFail != nil && st == abi.StatusOK:
		return h.hostFail
	case h.errSet:
		return errors.New(h.errMsg)
	case st == abi.StatusFailed:
		return errors.New("sdktest: the plugin returned FAILED without calling set_error")
	default:
		return errors.New("sdktest: the plugin returned status " + strconv.Itoa(int(st)) + " (ABI misuse)")
	}
}

// Logs returns the lines the plugin has logged so far.
func (h *Host) Logs() []Log { return slices.Clone(h.logs) }

// State returns the store called name (declared with Stores). Its methods
// read and write committed state: use them to seed state before a record
// and to check it after.
func (h *Host) State(name string) *Store {
	h.t.Helper()
	for _, s := range h.stores {
		if s.name == name {
			return s
		}
	}
	h.t.Fatalf("sdktest: no store %q declared (declared: %v)", name, h.storeNames())
	return nil
}

func (h *Host) storeNames() []string {
	names := make([]string, len(h.stores))
	for i, s := range h.stores {
		names[i] = s.name
	}
	return names
}

// calls is Host's implementation of fakeabi.Host, the wasmstream imports;
// a separate type so that they are not part of Host's API.
type calls Host

// check runs the injected fault, if any, and the phase rule of an import:
// emit and state calls only while processing a record; the others also
// during init. It returns a negative result to return instead, or 0.
func (h *calls) check(call string, stateful bool) int32 {
	if h.fault != nil {
		if e := h.fault(call); e != 0 {
			if e == abi.ErrnoIO || e == abi.ErrnoFault {
				h.failRecord(call, e)
			}
			return e.Result()
		}
	}
	switch {
	case h.phase >= phaseProcess, h.phase == phaseInit && !stateful:
		return 0
	}
	return abi.ErrnoPhase.Result()
}

func (h *calls) failRecord(call string, e abi.Errno) {
	if h.hostFail == nil {
		h.hostFail = errors.New("sdktest: the host failed the record: " + call + ": " + e.Error())
	}
}

// Emit implements the emit import.
func (h *calls) Emit(raw []byte) int32 {
	if r := h.check(abi.ImportEmit, true); r != 0 {
		return r
	}
	if h.phase == phaseMigrate {
		return abi.ErrnoPhase.Result()
	}
	if len(raw) > abi.MaxRecordSize {
		return abi.ErrnoTooLarge.Result()
	}
	var rec abi.Record
	if err := rec.Decode(raw); err != nil || rec.Partition < abi.AnyPartition {
		return abi.ErrnoInval.Result()
	}
	if int(rec.Index) >= len(h.outputs) {
		h.failRecord(abi.ImportEmit, abi.ErrnoNoOutput)
		return abi.ErrnoNoOutput.Result()
	}
	e := Emitted{Output: h.outputs[rec.Index], Key: clone(rec.Key), Value: clone(rec.Value),
		Timestamp: rec.Timestamp, Partition: rec.Partition, Raw: bytes.Clone(raw)}
	for _, hd := range rec.Headers {
		e.Headers = append(e.Headers, abi.Header{Key: hd.Key, Value: clone(hd.Value)})
	}
	h.emitted = append(h.emitted, e)
	return 0
}

// clone copies b, keeping nil nil and empty empty.
func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// OutputIndex implements the output_index import.
func (h *calls) OutputIndex(name string) int32 {
	if r := h.check(abi.ImportOutputIndex, false); r != 0 {
		return r
	}
	if i, ok := h.outIdx[name]; ok {
		return i
	}
	return abi.ErrnoNoName.Result()
}

// StoreIndex implements the store_index import.
func (h *calls) StoreIndex(name string) int32 {
	if r := h.check(abi.ImportStoreIndex, false); r != 0 {
		return r
	}
	for i, s := range h.stores {
		if s.name == name {
			return int32(i)
		}
	}
	return abi.ErrnoNoName.Result()
}

// Config implements the config import.
func (h *calls) Config(out []byte) int32 {
	if r := h.check(abi.ImportConfig, false); r != 0 {
		return r
	}
	if len(h.config) <= len(out) {
		copy(out, h.config)
	}
	return int32(len(h.config))
}

// Log implements the log import. Lines are kept for Logs and also passed
// to t.Logf, so they show with -v or when the test fails.
func (h *calls) Log(level uint32, msg string) int32 {
	if h.fault != nil {
		if e := h.fault(abi.ImportLog); e != 0 {
			return e.Result()
		}
	}
	if level > abi.LogError {
		return abi.ErrnoInval.Result()
	}
	if len(msg) > abi.MaxLogSize {
		msg = msg[:abi.MaxLogSize]
	}
	msg = strings.Clone(msg)
	h.logs = append(h.logs, Log{Level: sdk.Level(level), Msg: msg})
	h.t.Logf("plugin log [%s] %s", levelName(level), msg)
	return 0
}

func levelName(l uint32) string {
	switch l {
	case abi.LogDebug:
		return "debug"
	case abi.LogInfo:
		return "info"
	case abi.LogWarn:
		return "warn"
	}
	return "error"
}

// SetError implements the set_error import.
func (h *calls) SetError(msg string) int32 {
	if r := h.check(abi.ImportSetError, false); r != 0 {
		return r
	}
	if len(msg) > abi.MaxLogSize {
		msg = msg[:abi.MaxLogSize]
	}
	h.errMsg, h.errSet = strings.Clone(msg), true
	return 0
}

func (h *calls) store(idx uint32) (*Store, int32) {
	if int(idx) >= len(h.stores) {
		return nil, abi.ErrnoNoStore.Result()
	}
	return h.stores[idx], 0
}

// StateGet implements the state_get import.
func (h *calls) StateGet(store uint32, key, out []byte) int32 {
	if r := h.check(abi.ImportStateGet, true); r != 0 {
		return r
	}
	s, r := h.store(store)
	if r != 0 {
		return r
	}
	v, ok := s.read(string(key))
	if !ok {
		return abi.ErrnoNotFound.Result()
	}
	if len(v) <= len(out) {
		copy(out, v)
	}
	return int32(len(v))
}

// StatePut implements the state_put import.
func (h *calls) StatePut(store uint32, key, value []byte) int32 {
	if r := h.check(abi.ImportStatePut, true); r != 0 {
		return r
	}
	s, r := h.store(store)
	if r != 0 {
		return r
	}
	if len(key) > abi.MaxKeySize || len(value) > abi.MaxValueSize {
		return abi.ErrnoTooLarge.Result()
	}
	s.stage(string(key), append([]byte{}, value...))
	return 0
}

// StateDelete implements the state_delete import.
func (h *calls) StateDelete(store uint32, key []byte) int32 {
	if r := h.check(abi.ImportStateDelete, true); r != 0 {
		return r
	}
	s, r := h.store(store)
	if r != 0 {
		return r
	}
	s.stage(string(key), nil)
	return 0
}

// cursor is an open scan: a snapshot, taken at scan_open, of the entries in
// range with the record's staged writes applied.
type cursor struct {
	entries [][2]string
	next    int
}

// ScanOpen implements the scan_open import.
func (h *calls) ScanOpen(store uint32, start, end []byte) int32 {
	if r := h.check(abi.ImportScanOpen, true); r != 0 {
		return r
	}
	s, r := h.store(store)
	if r != 0 {
		return r
	}
	if len(h.cursors) >= abi.MaxOpenCursors {
		return abi.ErrnoLimit.Result()
	}
	c := &cursor{}
	for _, k := range s.view() {
		if k < string(start) || (len(end) > 0 && k >= string(end)) {
			continue
		}
		v, _ := s.read(k)
		c.entries = append(c.entries, [2]string{k, string(v)})
	}
	id := h.nextCursor
	h.nextCursor++
	h.cursors[id] = c
	return int32(id)
}

// ScanNext implements the scan_next import.
func (h *calls) ScanNext(id uint32, out []byte) int32 {
	if r := h.check(abi.ImportScanNext, true); r != 0 {
		return r
	}
	c, ok := h.cursors[id]
	if !ok {
		return abi.ErrnoNoCursor.Result()
	}
	if c.next == len(c.entries) {
		return 0
	}
	e := c.entries[c.next]
	n := abi.ScanEntryHeaderSize + len(e[0]) + len(e[1])
	if n <= len(out) {
		abi.EncodeScanEntry(out[:0], []byte(e[0]), []byte(e[1]))
		c.next++
	}
	return int32(n)
}

// ScanClose implements the scan_close import.
func (h *calls) ScanClose(id uint32) int32 {
	if r := h.check(abi.ImportScanClose, true); r != 0 {
		return r
	}
	if _, ok := h.cursors[id]; !ok {
		return abi.ErrnoNoCursor.Result()
	}
	delete(h.cursors, id)
	return 0
}
