package abi

import (
	"encoding/binary"
	"errors"
)

// Batches: ABI version 2 (ABI.md section 10). Version 2 is version 1 plus
// one export, wasmstream_batch, through which the host hands the plugin
// many calls (records and triggers) at once; everything else is version
// 1's. A plugin that exports both markers runs on a version-1 host one call
// at a time.

// VersionBatch is the ABI version that adds batches.
const VersionBatch = 2

// VersionMarkerBatch is the export a version-2 plugin has.
const VersionMarkerBatch = "wasmstream_abi_version_2"

// ExportBatch is batch(len u32) -> i32: the input buffer holds a batch of
// len bytes (BatchHeaderSize, then its slots). The plugin runs the slots'
// calls in order, writing each one's results into its slot and then
// advancing the batch's done count, and returns 0. Required in version 2.
const ExportBatch = "wasmstream_batch"

// The batch header, at the start of the input buffer. Integers are
// little-endian u32.
const (
	// BatchHeaderSize is the size of the header; the first slot follows.
	BatchHeaderSize = 16
	// BatchCount is the offset of the number of slots (written by the host).
	BatchCount = 0
	// BatchDone is the offset of the number of calls the plugin has
	// finished, written by the plugin after each call's results (the host
	// writes 0 first). The host ends a call when it sees done pass it.
	BatchDone = 4
	// BatchStop is the offset of the stop word: the host sets it to 1
	// during a call to ask the plugin to return once that call is done.
	BatchStop = 8
)

// A slot: one call of a batch. Slots start at 8-byte aligned offsets of
// the input buffer; the payload follows the slot header and the next slot
// starts at the next multiple of BatchAlign after it.
const (
	// SlotHeaderSize is the size of a slot's header.
	SlotHeaderSize = 24
	// SlotKind is the offset of the call's kind (host): SlotRecord or
	// SlotTrigger.
	SlotKind = 0
	// SlotStatus is the offset of the call's Status (plugin).
	SlotStatus = 4
	// SlotOutPtr and SlotOutLen are the offsets of the address and length
	// of the call's staged emits (plugin): a run of emit entries in plugin
	// memory, unchanged until the batch call returns (0, 0: none).
	SlotOutPtr = 8
	SlotOutLen = 12
	// SlotLen is the offset of the payload's length (host). It is the
	// 4 bytes just before the payload, so a payload that is a record is
	// also one emit entry in place.
	SlotLen = 20
	// BatchAlign is the alignment of slots.
	BatchAlign = 8
)

// Slot kinds.
const (
	// SlotRecord: the payload is a record (section 5), as wasmstream_process
	// takes it.
	SlotRecord uint32 = 0
	// SlotTrigger: the payload is a Trigger (section 8.4), as
	// wasmstream_on_timer (timer kinds) or wasmstream_on_commit
	// (TriggerCommit) takes it.
	SlotTrigger uint32 = 1
)

// SlotSize is the bytes one slot with a payload of n bytes takes, padding
// included.
func SlotSize(n int) int {
	return (SlotHeaderSize + n + BatchAlign - 1) &^ (BatchAlign - 1)
}

// PutBatchHeader writes a header for count slots into dst (at least
// BatchHeaderSize bytes): done and stop are 0.
func PutBatchHeader(dst []byte, count int) {
	le := binary.LittleEndian
	le.PutUint32(dst[BatchCount:], uint32(count))
	le.PutUint32(dst[BatchDone:], 0)
	le.PutUint32(dst[BatchStop:], 0)
	le.PutUint32(dst[12:], 0)
}

// PutSlotHeader writes the header of a slot of kind with an n-byte
// payload into dst (at least SlotHeaderSize bytes); the plugin's fields
// are 0.
func PutSlotHeader(dst []byte, kind uint32, n int) {
	le := binary.LittleEndian
	le.PutUint32(dst[SlotKind:], kind)
	le.PutUint32(dst[SlotStatus:], 0)
	le.PutUint32(dst[SlotOutPtr:], 0)
	le.PutUint32(dst[SlotOutLen:], 0)
	le.PutUint32(dst[16:], 0)
	le.PutUint32(dst[SlotLen:], uint32(n))
}

// An emit entry is one staged emit: a u32 length, then the emitted record
// in the record layout (section 5) of that length. A call's emits are its
// entries back to back, in emit order.

// ErrMalformedEmits is returned for a run of emit entries whose lengths do
// not add up.
var ErrMalformedEmits = errors.New("abi: malformed emit entries")

// AppendEmitEntry appends r as one emit entry to dst.
func AppendEmitEntry(dst []byte, r *Record) []byte {
	n := r.EncodedSize()
	dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	return r.AppendEncode(dst)
}

// NextEmitEntry splits the first emit entry off src: the record's bytes
// (not checked here: Record.Decode does) and the entries after it.
func NextEmitEntry(src []byte) (rec, rest []byte, err error) {
	if len(src) < 4 {
		return nil, nil, ErrMalformedEmits
	}
	n := binary.LittleEndian.Uint32(src)
	if uint64(n) > uint64(len(src)-4) {
		return nil, nil, ErrMalformedEmits
	}
	return src[4 : 4+n], src[4+n:], nil
}
