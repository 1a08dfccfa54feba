package sdk

import (
	"runtime"
	"strconv"

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
// the place to read and check Config and to Check outputs and stores, so a
// bad deployment fails at start with a clear message instead of on every
// record. An error fails the instance's start; its text is the reason the
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
	// in and cur are decoded into for every record, so decoding reuses
	// their header slices instead of allocating.
	in  abi.Record
	cur Record
	// processing is true while a handler runs; emits default their
	// timestamp to cur's then.
	processing bool
)

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
func process(n uint32) (status abi.Status) {
	if handler == nil {
		return fail("sdk: no handler: call sdk.Handle from an init function of package main")
	}
	if uint64(n) > uint64(len(inputBuf)) {
		return fail("sdk: record length " + strconv.FormatUint(uint64(n), 10) +
			" is beyond the input buffer (" + strconv.Itoa(len(inputBuf)) + " bytes)")
	}
	if err := in.Decode(inputBuf[:n]); err != nil {
		return fail("sdk: input record: " + err.Error())
	}
	cur = Record{
		Key:   in.Key,
		Value: in.Value,
		// Capped so that a handler appending to r.Headers copies instead
		// of writing into the decoder's spare capacity.
		Headers:   in.Headers[:len(in.Headers):len(in.Headers)],
		Timestamp: in.Timestamp,
		Partition: in.Partition,
		Offset:    in.Offset,
		Input:     int(in.Index),
	}
	processing = true
	defer func() {
		processing = false
		if p := recover(); p != nil {
			status = failPanic(p)
		}
	}()
	if err := handler(&cur); err != nil {
		return failErr(err)
	}
	return abi.StatusOK
}

// initialize is the body of the wasmstream_init export.
func initialize() (status abi.Status) {
	defer func() {
		if p := recover(); p != nil {
			status = failPanic(p)
		}
	}()
	if handler == nil {
		return fail("sdk: no handler: call sdk.Handle from an init function of package main")
	}
	if initHook != nil {
		if err := initHook(); err != nil {
			return failErr(err)
		}
	}
	return abi.StatusOK
}

// reset forgets what this instance learned from its host, as a new Wasm
// instance would start without it. Only the native build calls it (between
// fake hosts); registrations made by init functions (Handle, OnInit) stay,
// as they would after _initialize.
func reset() {
	generation++
	configCache, configGen = nil, 0
	processing = false
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
