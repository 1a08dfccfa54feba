package abi

import (
	"encoding/binary"
	"errors"
	"math"
)

// Record is one record as it crosses the ABI, in either direction.
//
// Layout (all integers little-endian), HeaderSize bytes of fixed fields then
// the variable parts in this order:
//
//	off size field
//	  0    8 timestamp     i64, milliseconds since the Unix epoch
//	  8    8 offset        i64, input offset; -1 on emitted records
//	 16    4 partition     i32, input partition; on emit -1 = host picks by key
//	 20    4 index         u32, input: index of the input topic in the
//	                       processor's inputs; emit: index of the output
//	 24    4 key length    i32, -1 = null key
//	 28    4 value length  i32, -1 = null value (a tombstone)
//	 32    4 header count  u32
//	 36      key bytes, value bytes, then each header:
//	         u32 name length, i32 value length (-1 = null), name, value
//
// Decoded byte slices alias the buffer they were decoded from; copy them to
// keep them past the buffer's lifetime.
type Record struct {
	Timestamp int64
	Offset    int64
	Partition int32
	Index     uint32
	Key       []byte // nil = null key
	Value     []byte // nil = null value
	Headers   []Header
}

// Header is one record header. A nil Value is a null header value.
type Header struct {
	Key   string
	Value []byte
}

// HeaderSize is the size of the fixed part of the record layout.
const HeaderSize = 36

// NoOffset is the offset field of an emitted record.
const NoOffset = -1

// AnyPartition on an emitted record lets the host choose the partition by
// hashing the key, as Kafka's default partitioner does.
const AnyPartition = -1

// ErrMalformed is returned for bytes that are not a valid record layout.
var ErrMalformed = errors.New("abi: malformed record")

// EncodedSize is the number of bytes Encode writes for r.
func (r *Record) EncodedSize() int {
	n := HeaderSize + len(r.Key) + len(r.Value)
	for i := range r.Headers {
		n += 8 + len(r.Headers[i].Key) + len(r.Headers[i].Value)
	}
	return n
}

// AppendEncode appends r's layout to dst and returns the extended slice.
func (r *Record) AppendEncode(dst []byte) []byte {
	n := r.EncodedSize()
	start := len(dst)
	if cap(dst)-start < n {
		grown := make([]byte, start, start+n)
		copy(grown, dst)
		dst = grown
	}
	dst = dst[:start+n]
	r.EncodeTo(dst[start:])
	return dst
}

// EncodeTo writes r's layout into dst, which must hold EncodedSize bytes, and
// returns the number of bytes written. It does not allocate.
func (r *Record) EncodeTo(dst []byte) int {
	le := binary.LittleEndian
	le.PutUint64(dst[0:], uint64(r.Timestamp))
	le.PutUint64(dst[8:], uint64(r.Offset))
	le.PutUint32(dst[16:], uint32(r.Partition))
	le.PutUint32(dst[20:], r.Index)
	le.PutUint32(dst[24:], uint32(lenOrNull(r.Key)))
	le.PutUint32(dst[28:], uint32(lenOrNull(r.Value)))
	le.PutUint32(dst[32:], uint32(len(r.Headers)))
	p := HeaderSize
	p += copy(dst[p:], r.Key)
	p += copy(dst[p:], r.Value)
	for i := range r.Headers {
		h := &r.Headers[i]
		le.PutUint32(dst[p:], uint32(len(h.Key)))
		le.PutUint32(dst[p+4:], uint32(lenOrNull(h.Value)))
		p += 8
		p += copy(dst[p:], h.Key)
		p += copy(dst[p:], h.Value)
	}
	return p
}

// Decode parses src into r. Key, Value and header values alias src; header
// names are converted to strings (one allocation each). r.Headers is reused
// when it has capacity, so a caller that decodes into the same Record for
// every record allocates only for header names.
func (r *Record) Decode(src []byte) error {
	if len(src) < HeaderSize {
		return ErrMalformed
	}
	le := binary.LittleEndian
	r.Timestamp = int64(le.Uint64(src[0:]))
	r.Offset = int64(le.Uint64(src[8:]))
	r.Partition = int32(le.Uint32(src[16:]))
	r.Index = le.Uint32(src[20:])
	keyLen := int32(le.Uint32(src[24:]))
	valLen := int32(le.Uint32(src[28:]))
	count := le.Uint32(src[32:])
	if count > MaxHeaders {
		return ErrMalformed
	}
	p := HeaderSize
	var ok bool
	if r.Key, p, ok = take(src, p, keyLen); !ok {
		return ErrMalformed
	}
	if r.Value, p, ok = take(src, p, valLen); !ok {
		return ErrMalformed
	}
	r.Headers = r.Headers[:0]
	for i := uint32(0); i < count; i++ {
		if len(src)-p < 8 {
			return ErrMalformed
		}
		nameLen := int32(le.Uint32(src[p:]))
		hvLen := int32(le.Uint32(src[p+4:]))
		p += 8
		if nameLen < 0 {
			return ErrMalformed
		}
		var name, val []byte
		if name, p, ok = take(src, p, nameLen); !ok {
			return ErrMalformed
		}
		if val, p, ok = take(src, p, hvLen); !ok {
			return ErrMalformed
		}
		r.Headers = append(r.Headers, Header{Key: string(name), Value: val})
	}
	if p != len(src) {
		return ErrMalformed // trailing bytes: the lengths do not add up
	}
	return nil
}

// take returns n bytes of src at p (nil for n == -1), the next position and
// whether they were there. A zero-length non-null field is a non-nil empty
// slice so that null and empty stay distinct.
func take(src []byte, p int, n int32) ([]byte, int, bool) {
	if n == -1 {
		return nil, p, true
	}
	if n < 0 || int64(n) > int64(len(src)-p) {
		return nil, p, false
	}
	end := p + int(n)
	return src[p:end:end], end, true
}

func lenOrNull(b []byte) int32 {
	if b == nil {
		return -1
	}
	if len(b) > math.MaxInt32 {
		panic("abi: field over 2 GiB")
	}
	return int32(len(b))
}

// ScanEntry layout, written by scan_next: u32 key length, u32 value length,
// key bytes, value bytes.
const ScanEntryHeaderSize = 8

// EncodeScanEntry appends one scan entry to dst.
func EncodeScanEntry(dst, key, value []byte) []byte {
	var h [ScanEntryHeaderSize]byte
	binary.LittleEndian.PutUint32(h[0:], uint32(len(key)))
	binary.LittleEndian.PutUint32(h[4:], uint32(len(value)))
	dst = append(dst, h[:]...)
	dst = append(dst, key...)
	return append(dst, value...)
}

// DecodeScanEntry splits a scan entry into key and value, which alias src.
func DecodeScanEntry(src []byte) (key, value []byte, err error) {
	if len(src) < ScanEntryHeaderSize {
		return nil, nil, ErrMalformed
	}
	kl := uint64(binary.LittleEndian.Uint32(src[0:]))
	vl := uint64(binary.LittleEndian.Uint32(src[4:]))
	if uint64(len(src)) != ScanEntryHeaderSize+kl+vl {
		return nil, nil, ErrMalformed
	}
	key = src[ScanEntryHeaderSize : ScanEntryHeaderSize+kl]
	value = src[ScanEntryHeaderSize+kl:]
	return key, value, nil
}
