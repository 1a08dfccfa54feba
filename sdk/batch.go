package sdk

import (
	"encoding/binary"
	"unsafe"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/sdk/internal/guest"
)

// Batches (abi/ABI.md section 10): the host hands the plugin many records
// or triggers in one wasmstream_batch call. The SDK runs each through the
// same handler as a single call would and stages its emits in an arena in
// plugin memory instead of calling the host per emit; the host takes them
// when it sees the call end. A handler cannot tell the difference.

// Arena sizes, in bytes.
const (
	// minArena is the first arena chunk.
	minArena = 64 << 10
	// arenaHandOver: past it, the batch returns after the current call so
	// the host takes the staged emits (it hands the rest of the calls
	// again), which bounds the arena at about this plus one call's emits.
	arenaHandOver = 1 << 20
)

var (
	// batching is set while wasmstream_batch runs: emits are staged.
	batching bool
	// arena holds the staged emits of the calls of the running batch, as
	// runs of emit entries; its array never moves while the batch runs
	// (the host reads a call's run after the call ends). A call whose
	// emits outgrow it moves them to a larger chunk; older chunks are
	// kept in arenaOld until the batch returns, for the calls whose runs
	// are there.
	arena    []byte
	arenaOld [][]byte
	// callStart is where the current call's run starts in arena.
	callStart int
	// forwarded is set when the current call's only emit so far is its
	// input record, forwarded in place: its fixed fields were rewritten
	// in the input buffer, and the run the host gets is the slot's length
	// field and the record after it (abi.SlotLen). A second emit copies it
	// into the arena first (materialize).
	forwarded bool
	// staged is set once the current call has emitted.
	staged bool
)

// batch is the body of wasmstream_batch: n bytes of calls in the input
// buffer (abi.BatchHeaderSize, then the slots). It returns 0, or 1 for a
// batch it cannot read (the host fails the call in progress).
//
// It is written for Go on Wasm, where a call costs about as much as
// decoding a record (see "The per-record path" in sdk.go): a record is
// decoded inline and its handler called from the loop itself, and one
// deferred recover for the whole batch (recoverBatch) fails the record
// whose handler panicked, after which the batch returns (the host hands
// the rest again), instead of a deferred call per record.
func batch(n uint32) (ret int32) {
	src := inputBuf
	if uint64(n) > uint64(len(src)) || n < abi.BatchHeaderSize {
		return 1
	}
	src = src[:n]
	le := binary.LittleEndian
	count := le.Uint32(src[abi.BatchCount:])
	batching = true
	arena, arenaOld = arena[:0], nil
	defer recoverBatch()
	off := abi.BatchHeaderSize
	for k := uint32(0); k < count; k++ {
		if len(src)-off < abi.SlotHeaderSize {
			break // the host sees the call unfinished, and fails it
		}
		slot := src[off:]
		_ = slot[abi.SlotHeaderSize-1]
		plen := int(le.Uint32(slot[abi.SlotLen:]))
		if plen > len(slot)-abi.SlotHeaderSize {
			break
		}
		callStart, forwarded, staged = len(arena), false, false
		curSlot, curDone = off, k+1
		st := abi.StatusOK
		if le.Uint32(slot[abi.SlotKind:]) != abi.SlotRecord {
			st = triggerSlot(slot[abi.SlotHeaderSize : abi.SlotHeaderSize+plen])
		} else if rec := slot[abi.SlotHeaderSize : abi.SlotHeaderSize+plen]; handler == nil || len(rec) < abi.HeaderSize {
			st = refuseSlot()
		} else {
			// The record, decoded as process does: one without headers
			// here, its slices set through their headers (no call); the
			// others by decodeMoved.
			lens := le.Uint64(rec[24:]) // one load for two fields
			keyLen, valLen := int32(lens), int32(lens>>32)
			count := le.Uint32(rec[32:])
			kn, vn := int(keyLen), int(valLen)
			if keyLen == -1 {
				kn = 0
			}
			if valLen == -1 {
				vn = 0
			}
			end := abi.HeaderSize + kn + vn
			switch {
			case keyLen < -1 || valLen < -1 || count > abi.MaxHeaders || end > len(rec):
				st = refuseSlot()
			case count != 0 || end != len(rec):
				if !decodeMoved(rec, keyLen, valLen, end, int(count)) {
					st = refuseSlot()
				}
			default:
				// As field would slice them: an empty field at the
				// record's start (Go slicing never points past the end),
				// a null one at nil.
				ko, vo := abi.HeaderSize, abi.HeaderSize+kn
				if kn == 0 {
					ko = 0
				}
				if vn == 0 {
					vo = 0
				}
				base := unsafe.Pointer(unsafe.SliceData(rec))
				kp, vp := unsafe.Add(base, ko), unsafe.Add(base, vo)
				if keyLen == -1 {
					kp = nil
				}
				if valLen == -1 {
					vp = nil
				}
				key := (*sliceHeader)(unsafe.Pointer(&cur.Key))
				value := (*sliceHeader)(unsafe.Pointer(&cur.Value))
				key.data, key.len, key.cap = kp, kn, kn
				value.data, value.len, value.cap = vp, vn, vn
				if cur.Headers != nil {
					cur.Headers = nil
				}
				cur.Timestamp = int64(le.Uint64(rec[0:]))
				cur.Offset = int64(le.Uint64(rec[8:]))
				pi := le.Uint64(rec[16:])
				cur.Partition = int32(pi)
				cur.Input = int(uint32(pi >> 32))
			}
			if st == abi.StatusOK {
				curLen, curAt = len(rec), off+abi.SlotHeaderSize
				err := handler(&cur)
				curLen = 0
				if err != nil {
					st = failErr(err)
				}
			}
		}
		// The call's results, then the done count.
		le.PutUint32(slot[abi.SlotStatus:], uint32(st))
		var ptr, size uint32
		if forwarded {
			ptr, size = addr(slot[abi.SlotLen:]), uint32(4+plen)
		} else if len(arena) > callStart {
			ptr, size = addr(arena[callStart:]), uint32(len(arena)-callStart)
		}
		le.PutUint32(slot[abi.SlotOutPtr:], ptr)
		le.PutUint32(slot[abi.SlotOutLen:], size)
		le.PutUint32(src[abi.BatchDone:], k+1)
		if st != abi.StatusOK || le.Uint32(src[abi.BatchStop:]) != 0 || len(arena) > arenaHandOver {
			break
		}
		off += abi.SlotSize(plen)
	}
	curSlot = -1
	batching, forwarded = false, false
	return 0
}

// curSlot is the offset in the input buffer of the batch's call in
// progress (-1: none), and curDone the done count its end writes: for
// recoverBatch.
var (
	curSlot = -1
	curDone uint32
)

// recoverBatch is deferred by batch: a record whose handler panicked fails
// with the panic's text (as in process), its emits dropped, and the batch
// returns. The older chunks of the arena are dropped once it returned (the
// host has taken every run by then).
func recoverBatch() {
	arenaOld = nil
	if curSlot < 0 {
		return
	}
	st := failPanic(recover())
	curLen, forwarded = 0, false
	arena = arena[:callStart]
	le := binary.LittleEndian
	slot := inputBuf[curSlot:]
	le.PutUint32(slot[abi.SlotStatus:], uint32(st))
	le.PutUint32(slot[abi.SlotOutPtr:], 0)
	le.PutUint32(slot[abi.SlotOutLen:], 0)
	le.PutUint32(inputBuf[abi.BatchDone:], curDone)
	curSlot = -1
	batching = false
}

// addr is the address of b's first byte in linear memory.
func addr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// refuseSlot fails a record of a batch that cannot be handed to the
// handler.
func refuseSlot() abi.Status {
	curLen = 0
	if handler == nil {
		return fail("sdk: no handler: call sdk.Handle from an init function of package main")
	}
	return fail("sdk: input record: " + abi.ErrMalformed.Error())
}

// triggerSlot runs a timer or commit trigger through the callbacks of
// package sdk/timer, which registered them.
func triggerSlot(trig []byte) abi.Status {
	if guest.Trigger == nil {
		return fail("sdk: a timer or commit trigger arrived but the plugin does not use package sdk/timer")
	}
	curLen = 0
	return guest.Trigger(trig)
}

// stage hands the encoded record rec to the batch: input says rec is the
// input record's own bytes in the input buffer, which the call's first
// emit forwards in place. Anything else is copied into the arena.
func stage(rec []byte, input bool) error {
	if input && !staged {
		forwarded, staged = true, true
		return nil
	}
	staged = true
	dst := reserve(4 + len(rec))
	binary.LittleEndian.PutUint32(dst, uint32(len(rec)))
	copy(dst[4:], rec)
	return nil
}

// stageNew returns the n bytes of a record that the caller encodes in
// place in the arena, staged as stage would stage it.
func stageNew(n int) []byte {
	staged = true
	var dst []byte
	if at := len(arena); at+4+n <= cap(arena) { // reserve, without the call
		arena = arena[:at+4+n]
		dst = arena[at:]
	} else {
		dst = reserveMore(4 + n)
	}
	binary.LittleEndian.PutUint32(dst, uint32(n))
	return dst[4:]
}

// materialize copies the forwarded input record into the arena, where the
// call's next emits follow it.
func materialize() {
	forwarded = false
	rec := inputBuf[curAt : curAt+curLen]
	dst := reserve(4 + len(rec))
	binary.LittleEndian.PutUint32(dst, uint32(len(rec)))
	copy(dst[4:], rec)
}

// reserve returns n bytes at the end of the current call's run;
// reserveMore moves the run to a larger chunk when the arena is full.
func reserve(n int) []byte {
	at := len(arena)
	if at+n > cap(arena) {
		return reserveMore(n)
	}
	arena = arena[:at+n]
	return arena[at:]
}

// reserveMore is reserve when the arena is full (not inlined: stageNew
// writes reserve's common case out instead of calling it).
//
//go:noinline
func reserveMore(n int) []byte {
	run := arena[callStart:]
	next := make([]byte, len(run), max(2*cap(arena), len(run)+n, minArena))
	copy(next, run)
	if callStart > 0 {
		arenaOld = append(arenaOld, arena) // earlier calls' runs are there
	}
	arena, callStart = next, 0
	at := len(arena)
	arena = arena[:at+n]
	return arena[at:]
}
