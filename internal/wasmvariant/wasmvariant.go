// Package wasmvariant makes distinct builds of a Wasm module: the same
// behaviour, other bytes in both its code and its data. wazero keys a
// compiled module by the hash of its bytes, so a variant shares nothing
// with the module it came from or with another variant: it is decoded,
// compiled and kept anew, as a new build of a plugin is when it is
// deployed. The version-release tests (host) and make soak (internal/soak)
// deploy variants to show that a replaced version leaves nothing behind.
//
// A variant adds to the module one function, never exported or called,
// whose body is a run of constants derived from the variant's number, and
// one passive data segment of bytes derived from it (never copied into
// memory: no memory.init refers to it). Everything else is left as it
// was, custom sections included.
package wasmvariant

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
)

// Options size what a variant adds.
type Options struct {
	// CodeBytes is roughly the size of the added function's body; at
	// least 16. Default 4 KiB.
	CodeBytes int
	// DataBytes is the size of the added data segment. Default 64 KiB.
	DataBytes int
}

// Section ids of the binary format (WebAssembly core 2.0, section 5.5).
const (
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secCode      = 10
	secData      = 11
	secDataCount = 12
)

type section struct {
	id      byte
	payload []byte
}

// Make returns variant n of wasm (a valid module): different n give
// different bytes, the same n the same bytes.
func Make(wasm []byte, n uint64, o Options) ([]byte, error) {
	if o.CodeBytes <= 0 {
		o.CodeBytes = 4 << 10
	}
	o.CodeBytes = max(o.CodeBytes, 16)
	if o.DataBytes <= 0 {
		o.DataBytes = 64 << 10
	}
	secs, err := parse(wasm)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(n, 0x7761736d76617269)) // "wasmvari"

	// The type () -> i32, appended to the type section.
	typeIdx := uint32(0)
	ti := index(secs, secType)
	if ti < 0 {
		secs = insert(secs, section{id: secType, payload: []byte{0}})
		ti = index(secs, secType)
	}
	if typeIdx, secs[ti].payload, err = appendEntry(secs[ti].payload, []byte{0x60, 0x00, 0x01, 0x7f}); err != nil {
		return nil, fmt.Errorf("wasmvariant: type section: %w", err)
	}

	// The function's entry in the function section.
	fi := index(secs, secFunction)
	if fi < 0 {
		secs = insert(secs, section{id: secFunction, payload: []byte{0}})
		fi = index(secs, secFunction)
	}
	if _, secs[fi].payload, err = appendEntry(secs[fi].payload, uleb(nil, uint64(typeIdx))); err != nil {
		return nil, fmt.Errorf("wasmvariant: function section: %w", err)
	}

	// Its body: no locals, (i32.const k; drop)*, i32.const n, end.
	body := []byte{0x00}
	for len(body) < o.CodeBytes {
		body = append(body, 0x41)
		body = sleb(body, int64(int32(rng.Uint32())))
		body = append(body, 0x1a)
	}
	body = append(body, 0x41)
	body = sleb(body, int64(int32(n)))
	body = append(body, 0x0b)
	ci := index(secs, secCode)
	if ci < 0 {
		secs = insert(secs, section{id: secCode, payload: []byte{0}})
		ci = index(secs, secCode)
	}
	if _, secs[ci].payload, err = appendEntry(secs[ci].payload, uleb(nil, uint64(len(body))), body...); err != nil {
		return nil, fmt.Errorf("wasmvariant: code section: %w", err)
	}

	// A passive data segment: flag 1, then the bytes.
	data := make([]byte, o.DataBytes)
	for i := 0; i < len(data); i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], rng.Uint64())
		copy(data[i:], w[:])
	}
	seg := uleb([]byte{0x01}, uint64(len(data)))
	di := index(secs, secData)
	if di < 0 {
		secs = insert(secs, section{id: secData, payload: []byte{0}})
		di = index(secs, secData)
	}
	if _, secs[di].payload, err = appendEntry(secs[di].payload, seg, data...); err != nil {
		return nil, fmt.Errorf("wasmvariant: data section: %w", err)
	}
	if dc := index(secs, secDataCount); dc >= 0 {
		c, _, err := readULEB(secs[dc].payload)
		if err != nil {
			return nil, fmt.Errorf("wasmvariant: data count section: %w", err)
		}
		secs[dc].payload = uleb(nil, c+1)
	}

	out := append([]byte(nil), wasm[:8]...)
	for _, s := range secs {
		out = append(out, s.id)
		out = uleb(out, uint64(len(s.payload)))
		out = append(out, s.payload...)
	}
	return out, nil
}

// parse splits a module into its sections.
func parse(wasm []byte) ([]section, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" || binary.LittleEndian.Uint32(wasm[4:8]) != 1 {
		return nil, errors.New("wasmvariant: not a Wasm module of version 1")
	}
	var secs []section
	rest := wasm[8:]
	for len(rest) > 0 {
		id := rest[0]
		size, n, err := readULEB(rest[1:])
		if err != nil || uint64(len(rest)-1-n) < size {
			return nil, fmt.Errorf("wasmvariant: section %d at byte %d: bad size", id, len(wasm)-len(rest))
		}
		start := 1 + n
		secs = append(secs, section{id: id, payload: append([]byte(nil), rest[start:start+int(size)]...)})
		rest = rest[start+int(size):]
	}
	return secs, nil
}

// order is where a known section goes among the others (custom sections,
// id 0, stay where they are).
var order = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

// insert adds s before the first known section that comes after it.
func insert(secs []section, s section) []section {
	for i, t := range secs {
		if t.id != 0 && order[t.id] > order[s.id] {
			return append(secs[:i], append([]section{s}, secs[i:]...)...)
		}
	}
	return append(secs, s)
}

func index(secs []section, id byte) int {
	for i, s := range secs {
		if s.id == id {
			return i
		}
	}
	return -1
}

// appendEntry adds one entry (head then tail) to a vector section payload
// and returns the entry's index.
func appendEntry(payload, head []byte, tail ...byte) (uint32, []byte, error) {
	count, n, err := readULEB(payload)
	if err != nil {
		return 0, nil, err
	}
	out := uleb(nil, count+1)
	out = append(out, payload[n:]...)
	out = append(out, head...)
	out = append(out, tail...)
	return uint32(count), out, nil
}

func uleb(b []byte, v uint64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

func sleb(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func readULEB(b []byte) (v uint64, n int, err error) {
	for shift := uint(0); n < len(b) && shift < 64; shift += 7 {
		c := b[n]
		n++
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return v, n, nil
		}
	}
	return 0, 0, errors.New("bad LEB128 number")
}
