package sdk

import "github.com/wasmstream/wasmstream/abi"

// OutputHandle is a named output of the processor. Outputs are declared in
// the host's processor config (outputs: name -> topic); a plugin can emit
// only to declared ones. Create handles once (package variables or in the
// OnInit hook), not per record.
type OutputHandle struct {
	ref
}

// Output returns the handle of the output called name. It does not call the
// host: the name is resolved to an index (output_index) on first use and
// cached for the instance's life. Call Check from OnInit to fail at start if
// the processor does not declare it.
func Output(name string) *OutputHandle {
	return &OutputHandle{ref{name: name, call: abi.ImportOutputIndex}}
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
	// downstream windowing usually wants.
	Timestamp int64
}

// Emit sends r to this output. The host picks the partition by hashing the
// key, as Kafka's default partitioner does (abi.AnyPartition). The record is
// staged: it is produced only if the current record succeeds. Errors wrap
// abi.ErrnoTooLarge (the encoded record is over abi.MaxRecordSize),
// abi.ErrnoNoName (undeclared output), abi.ErrnoPhase (called during
// init).
func (o *OutputHandle) Emit(r Out) error {
	return o.emit(&r, abi.AnyPartition)
}

// EmitTo is Emit to an explicit partition of the output topic. A partition
// the topic does not have fails the record when the host produces it.
func (o *OutputHandle) EmitTo(partition int32, r Out) error {
	return o.emit(&r, partition)
}

// emitBuf holds the encoding of the record being emitted; reused so that a
// steady stream of emits does not allocate.
var emitBuf []byte

func (o *OutputHandle) emit(r *Out, partition int32) error {
	idx, err := o.index()
	if err != nil {
		return err
	}
	ts := r.Timestamp
	if ts == 0 && processing {
		ts = cur.Timestamp
	}
	rec := abi.Record{
		Timestamp: ts,
		Offset:    abi.NoOffset,
		Partition: partition,
		Index:     idx,
		Key:       r.Key,
		Value:     r.Value,
		Headers:   r.Headers,
	}
	// Checked here rather than left to the host so that an oversized
	// record neither grows emitBuf for good nor crosses into the host.
	if rec.EncodedSize() > abi.MaxRecordSize {
		return &HostError{Call: abi.ImportEmit, Name: o.name, Errno: abi.ErrnoTooLarge}
	}
	emitBuf = rec.AppendEncode(emitBuf[:0])
	if res := hostEmit(emitBuf); res < 0 {
		return hostErr(abi.ImportEmit, o.name, res)
	}
	return nil
}

// ref is a name resolved to a host index once per instance.
type ref struct {
	name string
	call string // abi.ImportOutputIndex or abi.ImportStoreIndex
	idx  uint32
	err  error  // a resolution that failed for good (ENONAME)
	gen  uint32 // generation idx or err belongs to; 0 = unresolved
}

func (r *ref) index() (uint32, error) {
	if r.gen == generation {
		return r.idx, r.err
	}
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
	r.idx, r.err, r.gen = uint32(res), nil, generation
	return r.idx, nil
}
