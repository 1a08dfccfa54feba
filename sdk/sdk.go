package sdk

import (
	"encoding/binary"
	"runtime"
	"strconv"
	"unsafe"

	"github.com/wasmstream/wasmstream/abi"
)

// Header is one record header; a nil Value is a null header value.
type Header = abi.Header

// Record is the input record a handler is called with.
//
// Key, Value and the headers' values alias the SDK's input buffer: they are
// valid only until the handler returns. nil means null (a null key, or a
// tombstone value); an empty non-nil slice is an empty key or value.
type Record struct {
	Key     []byte
	Value   []byte
	Headers []Header
	// Timestamp is the record's Kafka timestamp, in milliseconds since the
	// Unix epoch.
	Timestamp int64
	// Partition and Offset locate the record in its input topic.
	Partition int32
	Offset    int64
	// Input is the index of the record's topic in the processor's inputs
	// list (0 for a processor with one input).
	Input int
}

// Header returns the value of the last header named name, and whether
// there was one. Kafka allows repeated header names; the last one wins here
// as it does in most Kafka clients' lookups.
func (r *Record) Header(name string) (value []byte, ok bool) {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == name {
			return r.Headers[i].Value, true
		}
	}
	return nil, false
}

// Handle registers fn as the processor: the host calls it once per input
// record. Call it from an init function of package main. A later call
// replaces the handler.
//
// Returning an error fails the record (see the package documentation);
// returning nil commits the record's emits and state writes.
func Handle(fn func(r *Record) error) {
	if fn == nil {
		panic("sdk: Handle(nil)")
	}
	handler = fn
}

// OnInit registers fn to run once per instance, after the package init
// functions and before the first record (the wasmstream_init export). It is
// the place to read and check Config, so a bad deployment fails at start
// with a clear message instead of on every record. (Outputs and stores
// that are package variables, or that fn makes, are resolved at start
// without a Check.) An error fails the instance's start; its text is the reason the
// host reports. Emitting and state access are not allowed during init
// (abi.ErrnoPhase). A later call replaces the hook.
func OnInit(fn func() error) { initHook = fn }

// Instance state. A Wasm instance is single-threaded and calls into the SDK
// one export at a time, so none of this needs locking.
var (
	handler  func(*Record) error
	initHook func() error

	// generation identifies the current instance. Handles cache what they
	// resolved together with the generation they resolved it in; the
	// native build's Reset bumps it so a fake host starts from scratch. A
	// Wasm build never changes it.
	generation uint32 = 1

	// inputBuf is the buffer handed to the host by wasmstream_input. It is
	// referenced from here for the instance's life, so the host's pointer
	// into it stays valid (Go's garbage collector does not move objects).
	inputBuf []byte
	// cur is the record the handler is called with. process sets its
	// fields one by one, never assigning a whole Record (see "The
	// per-record path" below).
	cur Record
	// curHeaders backs cur.Headers and curNames remembers the previous
	// records' header names, so that decoding reuses both instead of
	// allocating for every record.
	curHeaders []Header
	curNames   []string
	// curLen is the length of the record in inputBuf while its handler
	// runs, and 0 otherwise (a record is at least abi.HeaderSize bytes);
	// curAt is where it starts (0 but in a batch). Emits default their
	// timestamp to cur's then, and may send the input bytes themselves
	// (see emit).
	curLen int
	curAt  int
)

// The per-record path (process, then Emit) is written for the code Go
// compiles to Wasm and wazero compiles to machine code, where the costs are
// not those of native Go (measured with gdb on wazero's output and with
// host/internal/engine's gosdk_bench_test.go):
//   - every load or store of linear memory is about ten instructions
//     (wazero checks its bounds), and Go keeps arguments, results, spilled
//     values and globals there;
//   - every call is about a hundred: Go's stack check, argument stores,
//     and the entry switch of Go's resumable functions;
//   - a struct copy over 16 bytes or a zeroing over 32 becomes memory.copy
//     or memory.fill, which wazero runs as calls to Go's memmove
//     (memory.fill as a loop of them);
//   - a write barrier check on a pointer store costs a taken branch.
// So process decodes the common record inline, storing only lengths and
// integers into cur; Emit is inlined into the handler and passes the
// fields, never an Out in memory; and emit sends a record that is the
// input's own key and value without encoding or copying it, by writing the
// four fixed fields that differ into the input buffer. A Go-SDK
// passthrough went from about 7.4x to about 2.4x the cost of wazero's call
// floor (a WAT passthrough) in raw wazero.

// Input buffer sizing, in bytes.
const (
	// minInput is the smallest input buffer. The host asks for 4096 at
	// start (ABI.md section 3); a larger first buffer avoids regrowing for
	// typical records.
	minInput = 64 << 10
	// maxInput is the largest record the SDK accepts. Larger requests get
	// 0 ("cannot"), which the host reports, instead of an allocation that
	// would hit the instance's memory limit.
	maxInput = 256 << 20
)

// input is the body of the wasmstream_input export: a buffer of at least
// size bytes, kept until the next call, or nil if the SDK cannot provide
// one. The buffer at least doubles when it grows (up to maxInput), so a
// stream of growing records reallocates O(log n) times. Like all Wasm
// memory, it never shrinks.
func input(size uint32) []byte {
	if size > maxInput {
		return nil
	}
	if int(size) > len(inputBuf) {
		n := max(int(size), min(2*len(inputBuf), maxInput), minInput)
		inputBuf = make([]byte, n)
	}
	return inputBuf
}

// process is the body of the wasmstream_process export: decode the record
// the host wrote into the input buffer (n bytes) and run the handler.
//
// The decoding of the common record is written out here rather than called
// (a call costs about as much as the decoding): a record without headers
// whose key and value start where the previous record's did (the input
// buffer does not move, so they do while the key length does not change).
// It stores only lengths: no pointer, so no write-barrier check, which
// costs a taken branch. The other records go through decodeMoved.
//
// It is the wasmstream_process export itself (abi.ExportProcess) rather than
// called from one, which saves a call; other builds ignore the directive.
//
//go:wasmexport wasmstream_process
func process(n uint32) (status abi.Status) {
	src := inputBuf
	if handler == nil || uint64(n) > uint64(len(src)) || n < abi.HeaderSize {
		return refuse(n)
	}
	src = src[:n]
	le := binary.LittleEndian
	lens := le.Uint64(src[24:]) // one load for two fields
	keyLen, valLen := int32(lens), int32(lens>>32)
	count := le.Uint32(src[32:])
	// Sizes and addresses with selects rather than branches: null is size
	// 0 and address nil.
	kn, vn := int(keyLen), int(valLen)
	if keyLen == -1 {
		kn = 0
	}
	if valLen == -1 {
		vn = 0
	}
	end := int64(abi.HeaderSize) + int64(kn) + int64(vn)
	if keyLen < -1 || valLen < -1 || count > abi.MaxHeaders || end > int64(len(src)) {
		return refuse(n)
	}
	// Where field (the slicing in decodeMoved) puts the key and the value:
	// an empty field at src's start, as Go slicing never makes a pointer
	// past the end of the buffer; a null one at nil.
	ko, vo := abi.HeaderSize, abi.HeaderSize+kn
	if kn == 0 {
		ko = 0
	}
	if vn == 0 {
		vo = 0
	}
	base := unsafe.Pointer(unsafe.SliceData(src))
	kp, vp := unsafe.Add(base, ko), unsafe.Add(base, vo)
	if keyLen == -1 {
		kp = nil
	}
	if valLen == -1 {
		vp = nil
	}
	key := (*sliceHeader)(unsafe.Pointer(&cur.Key))
	value := (*sliceHeader)(unsafe.Pointer(&cur.Value))
	if count != 0 || key.data != kp || value.data != vp || cur.Headers != nil || end != int64(len(src)) {
		if !decodeMoved(src, keyLen, valLen, int(end), int(count)) {
			return refuse(n)
		}
	} else {
		key.len, key.cap = kn, kn
		value.len, value.cap = vn, vn
		cur.Timestamp = int64(le.Uint64(src[0:]))
		cur.Offset = int64(le.Uint64(src[8:]))
		pi := le.Uint64(src[16:])
		cur.Partition = int32(pi)
		cur.Input = int(uint32(pi >> 32))
	}
	curLen, curAt = int(n), 0
	// A panicking handler fails its record, not its instance: a recovered
	// panic returns the status set here. The deferred call is open-coded
	// and captures nothing; it tells a panic from a return by curLen,
	// which only a return resets first.
	status = abi.StatusFailed
	defer recoverRecord()
	if err := handler(&cur); err != nil {
		return failRecord(err)
	}
	curLen = 0
	return abi.StatusOK
}

// failRecord is failErr for process: curLen is reset only after the
// error's text is read, so that a panic there is recovered too.
func failRecord(err error) abi.Status {
	st := failErr(err)
	curLen = 0
	return st
}

// recoverRecord is deferred by process: after a handler that panicked, it
// recovers and reports the panic.
func recoverRecord() {
	if curLen != 0 {
		curLen = 0
		failPanic(recover())
	}
}

// refuse fails a record that process cannot hand to the handler; out of
// process so that the common path stays small.
func refuse(n uint32) abi.Status {
	if handler == nil {
		return fail("sdk: no handler: call sdk.Handle from an init function of package main")
	}
	if uint64(n) > uint64(len(inputBuf)) {
		return fail("sdk: record length " + strconv.FormatUint(uint64(n), 10) +
			" is beyond the input buffer (" + strconv.Itoa(len(inputBuf)) + " bytes)")
	}
	return fail("sdk: input record: " + abi.ErrMalformed.Error())
}

// sliceHeader is the layout of a slice. process stores the lengths of
// cur's slices through it when their data pointers stay.
type sliceHeader struct {
	data     unsafe.Pointer
	len, cap int
}

// decodeMoved decodes the records process does not (see there) into cur
// and reports whether they are well formed, once their fixed fields are
// checked: the key and the value fit and end at end. Like
// abi.Record.Decode, it makes the byte slices alias src (capped, so that
// appending to one copies), nil for a length of -1 and a non-nil empty
// slice for 0. Header names are strings, reused from the previous records
// when the bytes are the same.
func decodeMoved(src []byte, keyLen, valLen int32, end, count int) bool {
	le := binary.LittleEndian
	p := abi.HeaderSize
	cur.Key, p, _ = field(src, p, keyLen)
	cur.Value, _, _ = field(src, p, valLen)
	cur.Timestamp = int64(le.Uint64(src[0:]))
	cur.Offset = int64(le.Uint64(src[8:]))
	cur.Partition = int32(le.Uint32(src[16:]))
	cur.Input = int(le.Uint32(src[20:]))
	if count == 0 {
		cur.Headers = nil
		return end == len(src)
	}
	return decodeHeaders(src, end, count)
}

// decodeHeaders decodes the count headers at src[p:] into cur.Headers.
func decodeHeaders(src []byte, p, count int) bool {
	le := binary.LittleEndian
	if cap(curHeaders) < count {
		curHeaders = make([]Header, count)
	}
	hs := curHeaders[:count]
	if len(curNames) < count {
		curNames = append(curNames, make([]string, count-len(curNames))...)
	}
	names := curNames[:count]
	for i := range hs {
		if len(src)-p < 8 {
			return false
		}
		nameLen := int32(le.Uint32(src[p:]))
		valLen := int32(le.Uint32(src[p+4:]))
		p += 8
		if nameLen < 0 {
			return false
		}
		var name []byte
		var ok bool
		if name, p, ok = field(src, p, nameLen); !ok {
			return false
		}
		h := &hs[i]
		if h.Value, p, ok = field(src, p, valLen); !ok {
			return false
		}
		if names[i] != string(name) { // no allocation: compared in place
			names[i] = string(name)
		}
		h.Key = names[i]
	}
	// Capped so that a handler appending to r.Headers copies instead of
	// writing into curHeaders' spare capacity.
	cur.Headers = hs[:count:count]
	return p == len(src)
}

// field returns the n bytes of src at p (nil for n == -1), the position
// after them and whether they were there, as abi's decoder does.
func field(src []byte, p int, n int32) ([]byte, int, bool) {
	if n == -1 {
		return nil, p, true
	}
	if n < 0 || int64(n) > int64(len(src)-p) {
		return nil, p, false
	}
	end := p + int(n)
	return src[p:end:end], end, true
}

// initialize is the body of the wasmstream_init export.
func initialize() (status abi.Status) {
	defer func() {
		inInit = false
		if p := recover(); p != nil {
			status = failPanic(p)
		}
	}()
	if handler == nil {
		return fail("sdk: no handler: call sdk.Handle from an init function of package main")
	}
	// The package variables' handles first, so that a hook that Checks
	// one does not fail first with a message about that one alone; then
	// those the hook made.
	if err := resolveDeclared(); err != nil {
		return failErr(err)
	}
	if initHook != nil {
		inInit = true
		err := initHook()
		inInit = false
		if err != nil {
			return failErr(err)
		}
		if err := resolveDeclared(); err != nil {
			return failErr(err)
		}
	}
	initDone()
	return abi.StatusOK
}

// reset forgets what this instance learned from its host, as a new Wasm
// instance would start without it. Only the native build calls it (between
// fake hosts); registrations made by init functions (Handle, OnInit) stay,
// as they would after _initialize.
func reset() {
	generation++
	configCache, configGen = nil, 0
	curLen = 0
}

func fail(msg string) abi.Status {
	hostSetError(msg)
	return abi.StatusFailed
}

func failErr(err error) abi.Status {
	msg := err.Error()
	if msg == "" {
		msg = "record rejected (the handler returned an error with no text)"
	}
	return fail(msg)
}

// failPanic reports a recovered panic: the value as the record's error, and
// the value with the panicking goroutine's stack at error level in the log,
// so the author can find the line.
func failPanic(p any) abi.Status {
	if p == nil { // runtime.Goexit, the one way out with nothing to recover
		return fail("sdk: the handler called runtime.Goexit")
	}
	msg := "panic: " + panicText(p)
	stack := make([]byte, 4096)
	stack = stack[:runtime.Stack(stack, false)]
	hostLog(abi.LogError, msg+"\n"+string(stack))
	return fail(msg)
}

// panicText renders a panic value without fmt (see the package doc's
// Weight section): the common cases exactly, anything else by kind.
func panicText(p any) string {
	switch v := p.(type) {
	case string:
		return v
	case error:
		return v.Error()
	case interface{ String() string }:
		return v.String()
	case int:
		return strconv.Itoa(v)
	case int32:
		return strconv.FormatInt(int64(v), 10)
	case int64:
		return strconv.FormatInt(v, 10)
	case uint32:
		return strconv.FormatUint(uint64(v), 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case bool:
		return strconv.FormatBool(v)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	default:
		return "(a value of a type the SDK does not print; panic with a string or an error)"
	}
}
