//! The bodies of the exports the `processor!` macro defines, and the SDK's
//! per-instance state. Not part of the API: use the macro.
//!
//! A Wasm instance is single-threaded and the host calls one export at a
//! time, so the state is a plain static there. Natively (the fake host of
//! `cargo test`, whose tests run on several threads) it is per thread.

use crate::{abi, sys, Commit, Errno, Error, Record, Result};
use core::cell::UnsafeCell;

/// Input buffer sizes, in bytes. The first buffer is larger than the 4096
/// the host asks for at start so that typical records never regrow it; the
/// largest keeps a hostile size from turning into an allocation that would
/// hit the instance's memory limit (the host then reports "cannot").
const MIN_INPUT: usize = 16 << 10;
const MAX_INPUT: usize = 256 << 20;

/// Staging arena sizes, in bytes (batches, abi/ABI.md section 10): the
/// first chunk, and the staged bytes past which a batch returns after the
/// call in progress so that the host takes them (it hands the rest of the
/// calls again), which bounds the arena at about this plus one call's
/// emits. The Go SDK's figures (sdk/batch.go) but a smaller first chunk: a
/// Rust instance is 128 KiB of memory.
const MIN_ARENA: usize = 16 << 10;
const ARENA_HAND_OVER: usize = 1 << 20;

pub(crate) struct Rt {
    /// The buffer handed to the host by wasmstream_input, in u64 words so
    /// that it is 8-byte aligned (a batch's slots are, and the host sends
    /// batches only to an aligned buffer); it is not moved or freed until
    /// the next wasmstream_input call.
    buf: Vec<u64>,
    /// The record being processed (in `buf`, a slot's payload in a batch)
    /// and its length while its processor runs; the length is 0 else.
    cur: *mut u8,
    cur_len: usize,
    /// Its timestamp, or the trigger's in a callback: the default of
    /// emitted records.
    cur_ts: i64,
    /// The encoding of the record being emitted, reused.
    emit: Vec<u8>,
    /// The first buffer every state get reads into (GET_BUF bytes once
    /// allocated): most values fit, and reading into it needs no zeroing.
    get: Vec<u8>,
    /// Set while wasmstream_batch runs: emits are staged in `arena`.
    batching: bool,
    /// The staged emits of the running batch's calls, a run of emit
    /// entries per call. Its bytes never move while the batch runs, nor
    /// until the next batch starts: the host reads a call's run when it
    /// sees the call end, for the last calls after wasmstream_batch
    /// returned (freeing would let the allocator write into them). A call
    /// whose emits outgrow it moves its own run to a larger chunk; the
    /// older chunk is kept in `arena_old` for the earlier calls' runs.
    arena: Vec<u8>,
    arena_old: Vec<Vec<u8>>,
    /// Where the current call's run starts in `arena`.
    call_start: usize,
    /// The current call's only emit so far is its input record, forwarded
    /// in place: its fixed fields were rewritten in the input buffer and
    /// its run is the slot's length field and the record after it
    /// (abi::SLOT_LEN). A second emit copies it into the arena first.
    forwarded: bool,
    /// The current call has emitted.
    staged: bool,
}

impl Rt {
    const fn new() -> Rt {
        Rt {
            buf: Vec::new(),
            cur: core::ptr::null_mut(),
            cur_len: 0,
            cur_ts: 0,
            emit: Vec::new(),
            get: Vec::new(),
            batching: false,
            arena: Vec::new(),
            arena_old: Vec::new(),
            call_start: 0,
            forwarded: false,
            staged: false,
        }
    }

    fn buf_ptr(&mut self) -> *mut u8 {
        self.buf.as_mut_ptr() as *mut u8
    }

    fn buf_len(&self) -> usize {
        self.buf.len() * 8
    }
}

struct Cell(UnsafeCell<Rt>);

// Only ever touched from the one thread a Wasm instance has.
#[cfg(target_arch = "wasm32")]
unsafe impl Sync for Cell {}

#[cfg(target_arch = "wasm32")]
static RT: Cell = Cell(UnsafeCell::new(Rt::new()));

#[cfg(target_arch = "wasm32")]
#[inline]
fn rt() -> *mut Rt {
    RT.0.get()
}

#[cfg(not(target_arch = "wasm32"))]
thread_local! {
    static RT: Cell = Cell(UnsafeCell::new(Rt::new()));
    static GENERATION: core::cell::Cell<u32> = core::cell::Cell::new(0);
}

#[cfg(not(target_arch = "wasm32"))]
#[inline]
fn rt() -> *mut Rt {
    RT.with(|c| c.0.get())
}

/// The instance generation that cached output and store indices belong to.
/// A Wasm instance is one generation; the fake host starts a new one (unique
/// across threads) for every Host, as a new instance forgets its indices.
#[cfg(target_arch = "wasm32")]
#[inline]
pub fn generation() -> u32 {
    1
}

#[cfg(not(target_arch = "wasm32"))]
pub fn generation() -> u32 {
    GENERATION.with(|g| g.get())
}

/// Starts a fresh instance on this thread (fake host only).
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn new_instance(gen: u32) {
    GENERATION.with(|g| g.set(gen));
    unsafe {
        let r = &mut *rt();
        r.buf = Vec::new();
        r.cur_len = 0;
        r.batching = false;
    }
}

/// The body of wasmstream_input: a buffer of at least `size` bytes, kept
/// until the next call, or null. It at least doubles when it grows.
pub fn input(size: u32) -> *mut u8 {
    let size = size as usize;
    if size > MAX_INPUT {
        return core::ptr::null_mut();
    }
    let r = unsafe { &mut *rt() };
    if size > r.buf_len() {
        let n = size.max((2 * r.buf_len()).min(MAX_INPUT)).max(MIN_INPUT);
        r.buf = vec![0; (n + 7) / 8];
    }
    r.buf_ptr()
}

/// The body of wasmstream_process: decode the `len` bytes in the input
/// buffer and run the processor on them.
pub fn process<F: Fn(&Record<'_>) -> Result<()>>(len: u32, f: F) -> i32 {
    let r = rt();
    let n = len as usize;
    let (ptr, cap) = unsafe { ((*r).buf_ptr(), (*r).buf_len()) };
    if n > cap {
        return fail(&format!("sdk: record length {} is beyond the input buffer ({} bytes)", n, cap));
    }
    unsafe { run_record(ptr, n, &f) }
}

/// Runs the processor on the record of `n` bytes at `ptr` (in the input
/// buffer): the one path of wasmstream_process and of a batch's records.
///
/// Safety: `[ptr, ptr + n)` is inside the input buffer, and nothing else
/// refers to it while the processor runs.
#[inline(always)]
unsafe fn run_record<F: Fn(&Record<'_>) -> Result<()>>(ptr: *mut u8, n: usize, f: &F) -> i32 {
    let r = rt();
    if n < abi::HEADER_SIZE {
        return fail("sdk: input record: abi: malformed record");
    }
    // The record's slices borrow only the bytes after the fixed part; the
    // fixed part is read through a borrow that ends with decode_split, so
    // forward may write it later.
    let (fixed, body) = (
        core::slice::from_raw_parts(ptr as *const u8, abi::HEADER_SIZE),
        core::slice::from_raw_parts(ptr.add(abi::HEADER_SIZE) as *const u8, n - abi::HEADER_SIZE),
    );
    let fields = match abi::decode_split(fixed, body) {
        Some(f) => f,
        None => return fail("sdk: input record: abi: malformed record"),
    };
    (*r).cur = ptr;
    (*r).cur_len = n;
    (*r).cur_ts = fields.timestamp;
    let res = f(&Record { f: fields });
    (*r).cur_len = 0;
    match res {
        Ok(()) => abi::STATUS_OK,
        Err(e) => fail_err(&e),
    }
}

/// The body of wasmstream_on_commit: decode the trigger of `len` bytes in
/// the input buffer and run the commit function on it. Emits default to
/// the trigger's timestamp (that of the last call that marked the key).
pub fn on_commit<F: Fn(&Commit<'_>) -> Result<()>>(len: u32, f: F) -> i32 {
    let r = rt();
    let n = len as usize;
    let (ptr, cap) = unsafe { ((*r).buf_ptr(), (*r).buf_len()) };
    if n > cap {
        return fail(&format!("sdk: trigger length {} is beyond the input buffer ({} bytes)", n, cap));
    }
    run_commit(unsafe { core::slice::from_raw_parts(ptr, n) }, f)
}

/// The body of wasmstream_migrate (abi/ABI.md section 13): the ID of the
/// version to migrate from is the `len` bytes of the input buffer.
#[doc(hidden)]
pub fn migrate<F: Fn(&str) -> Result<()>>(len: u32, f: F) -> i32 {
    let from = match input_bytes(len).map(core::str::from_utf8) {
        Some(Ok(s)) => s,
        Some(Err(_)) => return fail("sdk: migrate: the version ID is not UTF-8"),
        None => return fail("sdk: migrate: version ID length beyond the input buffer"),
    };
    match f(from) {
        Ok(()) => abi::STATUS_OK,
        Err(e) => fail_err(&e),
    }
}

/// Runs the commit function on the trigger `src`: the one path of
/// wasmstream_on_commit and of a batch's commit triggers.
#[inline]
fn run_commit<F: Fn(&Commit<'_>) -> Result<()>>(src: &[u8], f: F) -> i32 {
    let t = match abi::decode_trigger(src) {
        Some(t) if t.kind == abi::TRIGGER_COMMIT => t,
        _ => return fail("sdk: on_commit: abi: malformed commit trigger"),
    };
    set_input_timestamp(t.timestamp);
    let res = f(&Commit { t });
    set_input_timestamp(0);
    match res {
        Ok(()) => abi::STATUS_OK,
        Err(e) => fail_err(&e),
    }
}

/// A processor's timer function, as `processor!`'s `on_timer` names it.
pub type TimerFn = fn(&crate::timer::Firing<'_>) -> Result<()>;
/// A processor's commit function, as `processor!`'s `on_commit` names it.
pub type CommitFn = fn(&Commit<'_>) -> Result<()>;

/// The body of wasmstream_batch (abi/ABI.md section 10): the calls of the
/// batch of `len` bytes in the input buffer, in order, each through the
/// same path as its single-call export (the processor for a record, the
/// timer or commit function for a trigger), with its emits staged in the
/// arena instead of one host call each. After each call its status and
/// staged emits go into its slot, then the done count, so the host, which
/// reads done at every host call, attributes every host call to the call
/// in progress. It returns 0 after the last call, or earlier: after a
/// call that failed, when the host set stop, when the arena holds over
/// ARENA_HAND_OVER bytes (the host hands the rest again). 1 is for a batch
/// it cannot read (the host fails the call in progress).
///
/// A panic aborts (`panic = "abort"`): the instance traps, the host fails
/// the call in progress alone (the calls finished before it stand, their
/// results are in memory) and replaces the instance.
pub fn batch<F: Fn(&Record<'_>) -> Result<()>>(
    len: u32,
    f: F,
    on_timer: Option<TimerFn>,
    on_commit: Option<CommitFn>,
) -> i32 {
    let r = rt();
    let n = len as usize;
    let base = unsafe { (*r).buf_ptr() };
    if n > unsafe { (*r).buf_len() } || n < abi::BATCH_HEADER_SIZE {
        return 1;
    }
    let count = unsafe { read32(base.add(abi::BATCH_COUNT)) };
    unsafe {
        (*r).batching = true;
        (*r).arena.clear();
        // The previous batch's older chunks: the host has read every run
        // of it by now.
        (*r).arena_old.clear();
    }
    let mut off = abi::BATCH_HEADER_SIZE;
    for k in 0..count {
        // The slot's kind and payload, through a view of the batch that
        // ends here: the call may write into the input buffer.
        let (kind, payload) = match abi::slot_at(unsafe { core::slice::from_raw_parts(base, n) }, off) {
            Some(s) => s,
            None => break, // the host sees the call unfinished, and fails it
        };
        let plen = payload.len();
        let slot = unsafe { base.add(off) };
        let p = unsafe { base.add(payload.start) };
        unsafe {
            (*r).call_start = (*r).arena.len();
            (*r).forwarded = false;
            (*r).staged = false;
        }
        let st = match kind {
            abi::SLOT_RECORD => unsafe { run_record(p, plen, &f) },
            abi::SLOT_TRIGGER => run_trigger(unsafe { core::slice::from_raw_parts(p, plen) }, on_timer, on_commit),
            _ => fail(&format!("sdk: batch: unknown slot kind {}", kind)),
        };
        // The call's results, then the done count.
        unsafe {
            let (ptr, size) = {
                let rt = &*r; // the call is over: nothing else refers to the state
                if rt.forwarded {
                    (sys::address(slot.add(abi::SLOT_LEN)), (4 + plen) as u32)
                } else if rt.arena.len() > rt.call_start {
                    let run = &rt.arena[rt.call_start..];
                    (sys::address(run.as_ptr()), run.len() as u32)
                } else {
                    (0, 0)
                }
            };
            write32(slot.add(abi::SLOT_STATUS), st as u32);
            write32(slot.add(abi::SLOT_OUT_PTR), ptr);
            write32(slot.add(abi::SLOT_OUT_LEN), size);
            // The slot's fields before done: the host reads them once it
            // sees done pass the call (its watchdog reads done meanwhile).
            core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
            core::ptr::write_volatile(base.add(abi::BATCH_DONE) as *mut u32, (k + 1).to_le());
            let stop = u32::from_le(core::ptr::read_volatile(base.add(abi::BATCH_STOP) as *const u32));
            if st != abi::STATUS_OK || stop != 0 || (&(*r).arena).len() > ARENA_HAND_OVER {
                break;
            }
        }
        off += abi::slot_size(plen);
    }
    unsafe {
        (*r).batching = false;
        (*r).forwarded = false;
    }
    0
}

/// Runs a trigger of a batch through the callback its kind names.
fn run_trigger(src: &[u8], on_timer: Option<TimerFn>, on_commit: Option<CommitFn>) -> i32 {
    let kind = match abi::decode_trigger(src) {
        Some(t) => t.kind,
        None => return fail("sdk: batch: abi: malformed trigger"),
    };
    if kind == abi::TRIGGER_COMMIT {
        return match on_commit {
            Some(f) => run_commit(src, f),
            None => fail("sdk: a key reached its commit point but processor! names no on_commit function"),
        };
    }
    match on_timer {
        Some(f) => crate::timer::run_timer(src, f),
        None => fail("sdk: a timer fired but processor! names no on_timer function"),
    }
}

/// A little-endian u32 at p (4-byte aligned: batches are 8-byte aligned
/// and their fields at multiples of 4).
#[inline(always)]
unsafe fn read32(p: *const u8) -> u32 {
    u32::from_le(core::ptr::read(p as *const u32))
}

#[inline(always)]
unsafe fn write32(p: *mut u8, v: u32) {
    core::ptr::write(p as *mut u32, v.to_le())
}

/// The body of wasmstream_init.
pub fn init(f: fn() -> Result<()>) -> i32 {
    match f() {
        Ok(()) => abi::STATUS_OK,
        Err(e) => fail_err(&e),
    }
}

/// The init of a processor without one.
pub fn no_init() -> Result<()> {
    Ok(())
}

pub(crate) fn fail_err(e: &Error) -> i32 {
    let msg = e.to_string();
    if msg.is_empty() {
        return fail("record rejected (the processor returned an error with no text)");
    }
    fail(&msg)
}

pub(crate) fn fail(msg: &str) -> i32 {
    sys::set_error(msg.as_bytes());
    abi::STATUS_FAILED
}

/// The timestamp of the record being processed, or of the trigger of the
/// on_commit call (0 outside both).
pub(crate) fn input_timestamp() -> i64 {
    unsafe { (*rt()).cur_ts }
}

/// Sets the timestamp emits default to (a callback's trigger's; 0 after).
pub(crate) fn set_input_timestamp(ts: i64) {
    unsafe { (*rt()).cur_ts = ts }
}

/// The first `len` bytes of the input buffer, where the host wrote a
/// callback's trigger; `None` if the buffer is shorter.
pub(crate) fn input_bytes<'a>(len: u32) -> Option<&'a [u8]> {
    let r = rt();
    let (ptr, cap) = unsafe { ((*r).buf_ptr(), (*r).buf_len()) };
    if len as usize > cap {
        return None;
    }
    Some(unsafe { core::slice::from_raw_parts(ptr, len as usize) })
}

/// Runs f with the get buffer, GET_BUF bytes long.
pub(crate) fn with_get_buf<R>(f: impl FnOnce(&mut [u8]) -> R) -> R {
    let r = unsafe { &mut *rt() };
    if r.get.is_empty() {
        r.get = vec![0; crate::GET_BUF];
    }
    f(&mut r.get)
}

/// Emits the record of `n` bytes that `write` writes at the pointer it is
/// given (and returns the end of): staged in the arena inside a batch,
/// else with the emit import. The caller has checked n against
/// MAX_RECORD_SIZE (a staged emit gets no errno from the host: it fails
/// the call).
///
/// Safety: `write` writes exactly n bytes at the pointer.
pub(crate) unsafe fn emit_with(n: usize, write: impl FnOnce(*mut u8) -> *mut u8) -> i32 {
    let r = &mut *rt();
    let batching = r.batching;
    let buf = if batching {
        if r.forwarded {
            materialize(r);
        }
        reserve(r, 4 + n);
        r.staged = true;
        &mut r.arena // within capacity: the arena does not move
    } else {
        r.emit.clear();
        r.emit.reserve(n);
        &mut r.emit
    };
    let mut p = buf.as_mut_ptr().add(buf.len());
    if batching {
        // The emit entry's length, then the record (abi/ABI.md section 10).
        core::ptr::copy_nonoverlapping((n as u32).to_le_bytes().as_ptr(), p, 4);
        p = p.add(4);
    }
    let end = write(p);
    debug_assert_eq!(end, p.add(n));
    // Within the capacity reserved above, every byte of it written.
    buf.set_len(end as usize - buf.as_ptr() as usize);
    if batching {
        return 0;
    }
    sys::emit(&r.emit)
}

/// Emits the record in the input buffer as it is but for the fields an emit
/// sets (offset -1, any partition, the output index), written in place.
/// `None` if `f` is not the record being processed. In a batch the call's
/// first emit hands the host the record where it is (its run is the
/// slot's length field and the record); a later one copies it.
pub(crate) fn forward(f: &abi::Fields<'_>, output: u32) -> Option<i32> {
    let r = unsafe { &mut *rt() };
    let (ptr, n) = (r.cur, r.cur_len);
    if n == 0 || f.headers.as_ptr_range().end != unsafe { ptr.add(n) } as *const u8 {
        return None;
    }
    if r.batching {
        // Checked here: the host gives a staged emit no errno.
        if n > abi::MAX_RECORD_SIZE {
            return Some(-Errno::TOOLARGE.0);
        }
        if r.forwarded {
            materialize(r); // with the fields the first forward gave it
        }
    }
    let mut tail = [0u8; 16];
    tail[..8].copy_from_slice(&abi::NO_OFFSET.to_le_bytes());
    tail[8..12].copy_from_slice(&abi::ANY_PARTITION.to_le_bytes());
    tail[12..].copy_from_slice(&output.to_le_bytes());
    unsafe {
        // Bytes 8..24 (offset, partition, index): no live reference covers
        // them, see run_record.
        core::ptr::copy_nonoverlapping(tail.as_ptr(), ptr.add(8), 16);
        let rec = core::slice::from_raw_parts(ptr as *const u8, n);
        if !r.batching {
            return Some(sys::emit(rec));
        }
        if !r.staged {
            r.forwarded = true;
            r.staged = true;
        } else {
            stage_copy(r, rec);
        }
    }
    Some(0)
}

/// Copies the forwarded input record into the arena, where the call's
/// next emits follow it.
fn materialize(r: &mut Rt) {
    r.forwarded = false;
    let rec = unsafe { core::slice::from_raw_parts(r.cur as *const u8, r.cur_len) };
    stage_copy(r, rec);
}

/// Appends `rec` to the current call's run as one emit entry.
fn stage_copy(r: &mut Rt, rec: &[u8]) {
    reserve(r, 4 + rec.len());
    r.arena.extend_from_slice(&(rec.len() as u32).to_le_bytes());
    r.arena.extend_from_slice(rec);
    r.staged = true;
}

/// Makes room for `n` more bytes at the end of the current call's run
/// without moving the runs of the batch's earlier calls: when the arena is
/// full, the current run moves to a larger chunk and the old one is kept.
fn reserve(r: &mut Rt, n: usize) {
    if r.arena.capacity() - r.arena.len() >= n {
        return;
    }
    let run = r.arena.len() - r.call_start;
    let cap = (2 * r.arena.capacity()).max(run + n).max(MIN_ARENA);
    let mut next = Vec::with_capacity(cap);
    next.extend_from_slice(&r.arena[r.call_start..]);
    let old = core::mem::replace(&mut r.arena, next);
    if r.call_start > 0 {
        r.arena_old.push(old); // earlier calls' runs are there
    }
    r.call_start = 0;
}

/// The length of a handle's declaration record (`output!`, `store!`): a
/// kind byte, a length byte, the name.
pub const fn declaration_len(name: &str) -> usize {
    name.len() + 2
}

/// A handle's declaration record (abi/ABI.md, section 2), built at compile
/// time; a name the record cannot hold stops the build.
pub const fn declaration<const N: usize>(kind: u8, name: &str) -> [u8; N] {
    let b = name.as_bytes();
    assert!(!b.is_empty() && b.len() <= 255, "an output or store name is 1 to 255 bytes");
    assert!(N == b.len() + 2, "declaration: N is declaration_len(name)");
    let mut out = [0u8; N];
    out[0] = kind;
    out[1] = b.len() as u8;
    let mut i = 0;
    while i < b.len() {
        out[i + 2] = b[i];
        i += 1;
    }
    out
}
