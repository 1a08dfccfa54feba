//! The bodies of the exports the `processor!` macro defines, and the SDK's
//! per-instance state. Not part of the API: use the macro.
//!
//! A Wasm instance is single-threaded and the host calls one export at a
//! time, so the state is a plain static there. Natively (the fake host of
//! `cargo test`, whose tests run on several threads) it is per thread.

use crate::{abi, sys, Error, Record, Result};
use core::cell::UnsafeCell;

/// Input buffer sizes, in bytes. The first buffer is larger than the 4096
/// the host asks for at start so that typical records never regrow it; the
/// largest keeps a hostile size from turning into an allocation that would
/// hit the instance's memory limit (the host then reports "cannot").
const MIN_INPUT: usize = 16 << 10;
const MAX_INPUT: usize = 256 << 20;

pub(crate) struct Rt {
    /// The buffer handed to the host by wasmstream_input; it is not moved
    /// or freed until the next wasmstream_input call.
    buf: Vec<u8>,
    /// The length of the record in `buf` while its processor runs, else 0.
    cur_len: usize,
    /// Its timestamp: the default of emitted records.
    cur_ts: i64,
    /// The encoding of the record being emitted, reused.
    emit: Vec<u8>,
    /// The first buffer every state get reads into (GET_BUF bytes once
    /// allocated): most values fit, and reading into it needs no zeroing.
    get: Vec<u8>,
}

struct Cell(UnsafeCell<Rt>);

// Only ever touched from the one thread a Wasm instance has.
#[cfg(target_arch = "wasm32")]
unsafe impl Sync for Cell {}

#[cfg(target_arch = "wasm32")]
static RT: Cell = Cell(UnsafeCell::new(Rt { buf: Vec::new(), cur_len: 0, cur_ts: 0, emit: Vec::new(), get: Vec::new() }));

#[cfg(target_arch = "wasm32")]
#[inline]
fn rt() -> *mut Rt {
    RT.0.get()
}

#[cfg(not(target_arch = "wasm32"))]
thread_local! {
    static RT: Cell = Cell(UnsafeCell::new(Rt { buf: Vec::new(), cur_len: 0, cur_ts: 0, emit: Vec::new(), get: Vec::new() }));
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
    if size > r.buf.len() {
        let n = size.max((2 * r.buf.len()).min(MAX_INPUT)).max(MIN_INPUT);
        r.buf = vec![0; n];
    }
    r.buf.as_mut_ptr()
}

/// The body of wasmstream_process: decode the `len` bytes in the input
/// buffer and run the processor on them.
pub fn process<F: Fn(&Record<'_>) -> Result<()>>(len: u32, f: F) -> i32 {
    let r = rt();
    let n = len as usize;
    let (ptr, cap) = unsafe { ((*r).buf.as_mut_ptr(), (*r).buf.len()) };
    if n > cap {
        return fail(&format!("sdk: record length {} is beyond the input buffer ({} bytes)", n, cap));
    }
    if n < abi::HEADER_SIZE {
        return fail("sdk: input record: abi: malformed record");
    }
    // The record's slices borrow only the bytes after the fixed part; the
    // fixed part is read through a borrow that ends with decode_split, so
    // forward may write it later.
    let (fixed, body) = unsafe {
        (
            core::slice::from_raw_parts(ptr as *const u8, abi::HEADER_SIZE),
            core::slice::from_raw_parts(ptr.add(abi::HEADER_SIZE), n - abi::HEADER_SIZE),
        )
    };
    let fields = match abi::decode_split(fixed, body) {
        Some(f) => f,
        None => return fail("sdk: input record: abi: malformed record"),
    };
    unsafe {
        (*r).cur_len = n;
        (*r).cur_ts = fields.timestamp;
    }
    let res = f(&Record { f: fields });
    unsafe {
        (*r).cur_len = 0;
    }
    match res {
        Ok(()) => abi::STATUS_OK,
        Err(e) => fail_err(&e),
    }
}

/// The body of wasmstream_on_commit: decode the trigger of `len` bytes in
/// the input buffer and run the commit function on it. Emits default to
/// the trigger's timestamp (that of the last call that marked the key).
pub fn on_commit<F: Fn(&crate::Commit<'_>) -> Result<()>>(len: u32, f: F) -> i32 {
    let r = rt();
    let n = len as usize;
    let (ptr, cap) = unsafe { ((*r).buf.as_ptr(), (*r).buf.len()) };
    if n > cap {
        return fail(&format!("sdk: trigger length {} is beyond the input buffer ({} bytes)", n, cap));
    }
    let t = match abi::decode_trigger(unsafe { core::slice::from_raw_parts(ptr, n) }) {
        Some(t) if t.kind == abi::TRIGGER_COMMIT => t,
        _ => return fail("sdk: on_commit: abi: malformed commit trigger"),
    };
    unsafe {
        (*r).cur_ts = t.timestamp;
    }
    let res = f(&crate::Commit { t });
    unsafe {
        (*r).cur_ts = 0;
    }
    match res {
        Ok(()) => abi::STATUS_OK,
        Err(e) => fail_err(&e),
    }
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
    let (ptr, cap) = unsafe { ((*r).buf.as_ptr(), (*r).buf.len()) };
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

pub(crate) fn with_emit_buf<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    let r = unsafe { &mut *rt() };
    f(&mut r.emit)
}

/// Emits the record in the input buffer as it is but for the fields an emit
/// sets (offset -1, any partition, the output index), written in place.
/// `None` if `f` is not the record being processed.
pub(crate) fn forward(f: &abi::Fields<'_>, output: u32) -> Option<i32> {
    let r = rt();
    let (ptr, n) = unsafe { ((*r).buf.as_mut_ptr(), (*r).cur_len) };
    if n == 0 || f.headers.as_ptr_range().end != unsafe { ptr.add(n) } as *const u8 {
        return None;
    }
    let mut tail = [0u8; 16];
    tail[..8].copy_from_slice(&abi::NO_OFFSET.to_le_bytes());
    tail[8..12].copy_from_slice(&abi::ANY_PARTITION.to_le_bytes());
    tail[12..].copy_from_slice(&output.to_le_bytes());
    unsafe {
        // Bytes 8..24 (offset, partition, index): no live reference covers
        // them, see process.
        core::ptr::copy_nonoverlapping(tail.as_ptr(), ptr.add(8), 16);
        Some(sys::emit(core::slice::from_raw_parts(ptr, n)))
    }
}
