package state

import (
	"encoding/binary"
	"fmt"
)

// Key layout (version 1). Every Pebble key the package writes is one of:
//
//	formatKey                                   the layout version of the DB
//	T = 0x01 | uvarint(len(p)) | p | be32(part) a task's prefix (never a key itself)
//	T | 0x00 | uvarint(len(s)) | s              store s's checkpoint: be64 next changelog offset
//	T | 0x01 | uvarint(len(s)) | s | userkey    a value of store s
//
// Length prefixes make the encoding prefix-free: a task prefix is never a
// prefix of another task's prefix (same length byte and name means same
// processor, and the partition is fixed width), and a store prefix is never a
// prefix of another store's prefix within a task. So the key range
// [T, prefixEnd(T)) holds exactly one task's keys, and [S, prefixEnd(S))
// exactly one store's values: Wipe and Scan use those ranges and cannot
// reach another task or store.
const (
	layoutVersion  = 1
	taskNamespace  = 0x01
	kindCheckpoint = 0x00
	kindData       = 0x01
)

// formatKey sorts before every task key (0x00 < taskNamespace).
var formatKey = []byte("\x00wasmstream/state/format")

func taskPrefix(processor string, partition int32) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(processor)+4)
	b = append(b, taskNamespace)
	b = binary.AppendUvarint(b, uint64(len(processor)))
	b = append(b, processor...)
	return binary.BigEndian.AppendUint32(b, uint32(partition))
}

func storePrefix(task []byte, kind byte, store string) []byte {
	b := make([]byte, 0, len(task)+1+binary.MaxVarintLen64+len(store))
	b = append(b, task...)
	b = append(b, kind)
	b = binary.AppendUvarint(b, uint64(len(store)))
	return append(b, store...)
}

// prefixEnd returns the smallest key greater than every key that starts with
// p. Every prefix built here starts with taskNamespace, so one exists.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	panic("state: prefixEnd of an all-0xff prefix")
}

func encodeOffset(o int64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(o))
}

func decodeOffset(v []byte) (int64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: checkpoint value is %d bytes, want 8", ErrCorrupt, len(v))
	}
	o := int64(binary.BigEndian.Uint64(v))
	if o < 0 {
		return 0, fmt.Errorf("%w: negative checkpoint %d", ErrCorrupt, o)
	}
	return o, nil
}
