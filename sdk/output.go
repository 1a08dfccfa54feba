package sdk

import (
	"encoding/binary"
	"unsafe"

	"github.com/wasmstream/wasmstream/abi"
)

// OutputHandle is a named output of the processor. Outputs are declared in
// the host's processor config (outputs: name -> topic); a plugin can emit
// only to declared ones. Create handles once (package variables or in the
// OnInit hook), not per record.
type OutputHandle struct {
	ref
}

// Output returns the handle of the output called name. It does not call the
// host. A handle made while the plugin starts (a package variable, or in
// the OnInit hook) is resolved when the instance starts, so a processor
// that does not declare it fails to start (and `wasmstream validate`
// says so); one made later is resolved (output_index) on first use. The
// index is cached for the instance's life.
func Output(name string) *OutputHandle {
	h := &OutputHandle{ref{name: name, call: abi.ImportOutputIndex}}
	declare(&h.ref)
	return h
}

// Name is the output's name.
func (o *OutputHandle) Name() string { return o.name }

// Check resolves the output now and reports whether the processor declares
// it (an error wrapping abi.ErrnoNoName if not).
func (o *OutputHandle) Check() error {
	_, err := o.index()
	return err
}

// Out is a record to emit.
type Out struct {
	// Key and Value are the record's key and value; nil means null (a null
	// Value is a tombstone). They are copied by Emit.
	Key   []byte
	Value []byte
	// Headers are written in order; a nil header Value is a null value.
	Headers []Header
	// Timestamp is in milliseconds since the Unix epoch. Zero means the
	// timestamp of the input record being processed, which is what
	// downstream windowing usually wants; in a timer or commit callback
	// (package sdk/timer), the trigger's timestamp.
	Timestamp int64
}

// Emit sends r to this output. The host picks the partition by hashing the
// key, as Kafka's default partitioner does (abi.AnyPartition). The record is
// staged: it is produced only if the current record succeeds. Errors wrap
// abi.ErrnoTooLarge (the encoded record is over abi.MaxRecordSize),
// abi.ErrnoNoName (undeclared output), abi.ErrnoPhase (called during
// init).
func (o *OutputHandle) Emit(r Out) error {
	// Small enough to be inlined, and passing the fields rather than &r, so
	// that the caller's Out literal need not be built in memory (see "The
	// per-record path" in sdk.go).
	return o.emit(r.Key, r.Value, r.Headers, r.Timestamp, abi.AnyPartition)
}

// Forward emits the input record r as it came (key, value, headers and
// timestamp) to this output, the host picking the partition by key. For
// the record being processed it is the cheapest emit there is: the SDK
// hands the host its own input buffer with the fields an emit sets
// rewritten, without encoding or copying anything (see emit), as the Rust
// SDK's forward and the C SDK's ws_forward do. A record with timestamp 0
// gets the current call's timestamp, as Emit gives it.
func (o *OutputHandle) Forward(r *Record) error {
	return o.emit(r.Key, r.Value, r.Headers, r.Timestamp, abi.AnyPartition)
}

// EmitTo is Emit to an explicit partition of the output topic. A partition
// the topic does not have fails the record when the host produces it.
func (o *OutputHandle) EmitTo(partition int32, r Out) error {
	return o.emit(r.Key, r.Value, r.Headers, r.Timestamp, partition)
}

// noOffset is abi.NoOffset as the u64 the layout holds.
const noOffset = uint64(1<<64 + abi.NoOffset)

// emitBuf holds the encoding of the record being emitted; reused so that a
// steady stream of emits does not allocate.
var emitBuf []byte

// emit sends a record. Its fast path is a record that is the input's own
// key and value without headers, from a handler, to a resolved output: the
// input bytes are then the encoding but for the fixed fields before the key
// length, so emit writes those and hands the host the input buffer. The
// checks are arithmetic and every other case leaves for emitAny, so that
// this path takes no branch (see "The per-record path" in sdk.go).
func (o *OutputHandle) emit(key, value []byte, headers []Header, ts int64, partition int32) error {
	n := curLen
	if o.ok != generation || uint(n-1) >= abi.MaxRecordSize || len(headers) != 0 || forwarded { // n in [1, abi.MaxRecordSize]
		return o.emitAny(key, value, headers, ts, partition)
	}
	rec := inputBuf[curAt : curAt+n]
	fixed := rec[:abi.HeaderSize] // n >= abi.HeaderSize while a handler runs
	le := binary.LittleEndian
	// The layout's lengths (-1 for null) and where the bytes would be.
	keyLen, valLen := int32(len(key)), int32(len(value))
	if key == nil {
		keyLen = -1
	}
	if value == nil {
		valLen = -1
	}
	at := uintptr(unsafe.Pointer(unsafe.SliceData(rec))) + abi.HeaderSize
	keyAt := uintptr(unsafe.Pointer(unsafe.SliceData(key))) ^ at
	valAt := uintptr(unsafe.Pointer(unsafe.SliceData(value))) ^ (at + uintptr(len(key)))
	if len(key) == 0 {
		keyAt = 0
	}
	if len(value) == 0 {
		valAt = 0
	}
	lens := uint64(uint32(keyLen)) | uint64(uint32(valLen))<<32
	if lens != le.Uint64(fixed[24:]) || le.Uint32(fixed[32:]) != 0 || keyAt|valAt != 0 {
		return o.emitAny(key, value, headers, ts, partition)
	}
	if ts == 0 {
		ts = cur.Timestamp
	}
	le.PutUint64(fixed[0:], uint64(ts))
	le.PutUint64(fixed[8:], noOffset)
	le.PutUint64(fixed[16:], uint64(uint32(partition))|uint64(o.idx)<<32) // partition, index
	if batching {
		if !staged { // the call's first emit: forwarded in place
			forwarded, staged = true, true
			return nil
		}
		return stage(rec, true)
	}
	if res := hostEmit(rec); res < 0 {
		return hostErr(abi.ImportEmit, o.name, res)
	}
	return nil
}

// emitAny is emit for every record.
func (o *OutputHandle) emitAny(key, value []byte, headers []Header, ts int64, partition int32) error {
	idx, err := o.index()
	if err != nil {
		return err
	}
	if forwarded {
		// The call's first emit is the input record, forwarded in place;
		// its fixed fields are about to be written again.
		materialize()
	}
	var rec []byte
	input := false
	if n := curLen; n > 0 {
		if ts == 0 {
			ts = cur.Timestamp
		}
		// The input's own bytes are the encoding: only the fixed fields
		// before the key length differ. (A larger input takes the other
		// branch, which refuses it.)
		// (The first test, inline, turns away most records that are not.)
		keyAt := uintptr(unsafe.Pointer(unsafe.SliceData(inputBuf))) + uintptr(curAt+abi.HeaderSize)
		if n <= abi.MaxRecordSize && (len(key) == 0 || uintptr(unsafe.Pointer(unsafe.SliceData(key))) == keyAt) &&
			isInput(key, value, headers) {
			rec, input = inputBuf[curAt:curAt+n], true
		}
	} else if ts == 0 {
		ts = callbackTimestamp // a callback: the trigger's timestamp
	}
	staging := false
	if rec == nil {
		n := encodedSize(key, value, headers)
		// Checked here rather than left to the host so that an oversized
		// record neither grows emitBuf or the arena for good nor crosses
		// into the host.
		if n > abi.MaxRecordSize {
			return &HostError{Call: abi.ImportEmit, Name: o.name, Errno: abi.ErrnoTooLarge}
		}
		if batching {
			// Encoded in its place in the arena rather than in emitBuf
			// and then copied there.
			rec, staging = stageNew(n), true
		} else {
			if cap(emitBuf) < n {
				emitBuf = make([]byte, n)
			}
			rec = emitBuf[:n]
		}
		if len(headers) == 0 {
			// encodeBody's work for the common emit, without the call.
			le := binary.LittleEndian
			_ = rec[abi.HeaderSize-1]
			le.PutUint32(rec[24:], uint32(lenOrNull(key)))
			le.PutUint32(rec[28:], uint32(lenOrNull(value)))
			le.PutUint32(rec[32:], 0)
			copy(rec[abi.HeaderSize+copy(rec[abi.HeaderSize:], key):], value)
		} else {
			encodeBody(rec, key, value, headers)
		}
	}
	_ = rec[abi.HeaderSize-1]
	le := binary.LittleEndian
	le.PutUint64(rec[0:], uint64(ts))
	le.PutUint64(rec[8:], noOffset)
	le.PutUint32(rec[16:], uint32(partition))
	le.PutUint32(rec[20:], idx)
	if staging {
		return nil
	}
	if batching {
		return stage(rec, input)
	}
	if res := hostEmit(rec); res < 0 {
		return hostErr(abi.ImportEmit, o.name, res)
	}
	return nil
}

// isInput reports whether a record with this key, value and headers encodes
// to the bytes of the input record from its key length on: the same
// lengths, null where the input has null, slices that are the input's own
// bytes (where the handler got them from; modified in place or not, they
// are what an encoding would copy), and the same header names. The input
// layout was checked by process, and the handler cannot reach its
// length fields (its slices are capped).
func isInput(key, value []byte, headers []Header) bool {
	src := inputBuf[curAt : curAt+curLen]
	_ = src[abi.HeaderSize-1]
	le := binary.LittleEndian
	p := abi.HeaderSize
	if !sameField(key, src, &p, int32(le.Uint32(src[24:]))) ||
		!sameField(value, src, &p, int32(le.Uint32(src[28:]))) ||
		uint64(len(headers)) != uint64(le.Uint32(src[32:])) {
		return false
	}
	if len(headers) == 0 {
		return true
	}
	return sameHeaders(headers, src, p)
}

// sameHeaders is isInput for the headers, at src[p:].
func sameHeaders(headers []Header, src []byte, p int) bool {
	le := binary.LittleEndian
	for i := range headers {
		h := &headers[i]
		nameLen := int(le.Uint32(src[p:]))
		valLen := int32(le.Uint32(src[p+4:]))
		p += 8
		if len(h.Key) != nameLen || h.Key != string(src[p:p+nameLen]) {
			return false
		}
		p += nameLen
		if !sameField(h.Value, src, &p, valLen) {
			return false
		}
	}
	return true
}

// sameField reports whether b is the field of length n (-1: null) at
// src[*p:], and moves *p past it.
func sameField(b, src []byte, p *int, n int32) bool {
	if n < 0 {
		return b == nil
	}
	if b == nil || len(b) != int(n) {
		return false
	}
	if n > 0 && unsafe.SliceData(b) != &src[*p] {
		return false
	}
	*p += int(n)
	return true
}

// encodedSize is the size of a record's layout (abi.Record.EncodedSize).
func encodedSize(key, value []byte, headers []Header) int {
	n := abi.HeaderSize + len(key) + len(value)
	for i := range headers {
		n += 8 + len(headers[i].Key) + len(headers[i].Value)
	}
	return n
}

// encodeBody writes a record's layout from the key length on into dst,
// which is encodedSize bytes (abi.Record.EncodeTo without the four fields
// emit writes itself). Every length fits an int32: the record is at most
// abi.MaxRecordSize bytes.
func encodeBody(dst, key, value []byte, headers []Header) {
	le := binary.LittleEndian
	le.PutUint32(dst[24:], uint32(lenOrNull(key)))
	le.PutUint32(dst[28:], uint32(lenOrNull(value)))
	le.PutUint32(dst[32:], uint32(len(headers)))
	p := abi.HeaderSize
	p += copy(dst[p:], key)
	p += copy(dst[p:], value)
	for i := range headers {
		h := &headers[i]
		le.PutUint32(dst[p:], uint32(len(h.Key)))
		le.PutUint32(dst[p+4:], uint32(lenOrNull(h.Value)))
		p += 8
		p += copy(dst[p:], h.Key)
		p += copy(dst[p:], h.Value)
	}
}

// lenOrNull is a field's length, -1 for nil (null).
func lenOrNull(b []byte) int32 {
	if b == nil {
		return -1
	}
	return int32(len(b))
}

// ref is a name resolved to a host index once per instance.
type ref struct {
	name string
	call string // abi.ImportOutputIndex or abi.ImportStoreIndex
	idx  uint32
	err  error  // a resolution that failed for good (ENONAME)
	gen  uint32 // generation idx or err belongs to; 0 = unresolved
	ok   uint32 // gen when idx is valid (err is nil), for emit's one check
	// declGen is the generation whose start resolves the handle, 0 for
	// every start (a package variable); see declare.go.
	declGen uint32
}

// index is the handle's index, resolved on first use. The check is apart
// from the resolution so that it is inlined into every state call and emit
// (a call costs as much as the check; see "The per-record path" in sdk.go).
func (r *ref) index() (uint32, error) {
	if r.gen == generation {
		return r.idx, r.err
	}
	return r.resolve()
}

// resolve asks the host for the handle's index.
func (r *ref) resolve() (uint32, error) {
	var res int32
	if r.call == abi.ImportOutputIndex {
		res = hostOutputIndex(r.name)
	} else {
		res = hostStoreIndex(r.name)
	}
	if res < 0 {
		err := hostErr(r.call, r.name, res)
		if abi.Errno(-res) == abi.ErrnoNoName {
			// Declarations do not change during an instance's life, so
			// this answer is final; other errors may be transient.
			r.err, r.gen = err, generation
		}
		return 0, err
	}
	r.idx, r.err, r.gen, r.ok = uint32(res), nil, generation, generation
	return r.idx, nil
}
