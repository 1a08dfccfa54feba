//! Time (abi/ABI.md section 8): timers that call the processor back when the
//! task's stream time or the host's wall clock reaches them, the two clocks
//! themselves, and commit marks, which call it once per commit window per
//! marked key. It mirrors the Go SDK's package sdk/timer.
//!
//! ```text
//! use wasmstream::timer::{self, Firing, EVENT_TIME};
//!
//! fn process(r: &Record) -> Result<()> {
//!     // close this key's minute at its end, in event time
//!     let end = r.timestamp() - r.timestamp() % 60_000 + 60_000;
//!     timer::set(EVENT_TIME, end, r.key().unwrap_or(b""))?;
//!     Ok(())
//! }
//!
//! fn fired(f: &Firing) -> Result<()> {
//!     OUT.emit(&Out::new(Some(f.key()), Some(b"minute over")))
//! }
//!
//! wasmstream::processor!(process, init, on_timer = fired);
//! ```
//!
//! Timers are state: the host stores them with the task's stores, commits
//! them with the input offsets and restores them with the stores, so a
//! timer fires at most once in committed output. A processor sets a timer
//! from process, from its timer function or from its commit function;
//! setting the same (kind, time, key) twice is one timer. A processor that
//! sets timers gives `processor!` a timer function (`on_timer = f`) and
//! declares a store: the host refuses the module otherwise.
//!
//! The imports are linked only if the processor calls the functions that
//! use them, and the callbacks are exported only when `processor!` names
//! them, so a processor without time is unchanged.

use crate::{abi, sys, Error, Result};

/// A timer's kind: what its time is measured against.
pub type Kind = u32;

/// Event-time timers fire when the task's stream time (the largest record
/// timestamp it has seen) reaches their time: after the record that moved
/// it there, or at the next commit point.
pub const EVENT_TIME: Kind = abi::TIMER_EVENT_TIME;
/// Processing-time timers fire when the host's wall clock reaches their
/// time, at a commit point at the latest: the host runs commit points on
/// schedule even when no record arrives.
pub const PROCESSING_TIME: Kind = abi::TIMER_PROCESSING_TIME;
/// The stream time of a task that has not seen a record with a timestamp
/// yet; it is below every time.
pub const NO_TIME: i64 = abi::NO_TIME;

fn check(call: &'static str, r: i32) -> Result<bool> {
    match abi::Errno::of(r) {
        None => Ok(r == 1),
        Some(e) => Err(Error::host(call, "", e)),
    }
}

/// Sets the timer (kind, ts, key): ts in ms since the Unix epoch; the key
/// any bytes up to `abi::MAX_TIMER_KEY_SIZE`, empty included. `Ok(true)` if
/// the timer is new, `Ok(false)` if it was already pending (nothing
/// changed). A timer whose time has come fires at the next check. Errors:
/// EINVAL (bad kind, negative ts), ETOOLARGE (key), ELIMIT (the task's
/// pending-timer limit), EPHASE (during init). Like state writes, the change
/// stands only if the current call succeeds.
pub fn set(kind: Kind, ts: i64, key: &[u8]) -> Result<bool> {
    check("timer_set", sys::timer_set(kind, ts, key))
}

/// Removes the timer (kind, ts, key); `Ok(true)` if it was pending.
pub fn cancel(kind: Kind, ts: i64, key: &[u8]) -> Result<bool> {
    check("timer_cancel", sys::timer_cancel(kind, ts, key))
}

/// The task's stream time as the current call sees it (ms since the epoch),
/// or `NO_TIME`. During process it already includes the record being
/// processed; a record processed again after an abort sees the same.
pub fn stream_time() -> Result<i64> {
    now(abi::CLOCK_STREAM)
}

/// The host's wall clock for the current call (ms since the epoch). Unlike
/// everything else a processor sees it is not reproducible: a record
/// processed again sees the time of its new processing.
pub fn wall_time() -> Result<i64> {
    now(abi::CLOCK_WALL)
}

fn now(clock: u32) -> Result<i64> {
    let t = sys::time_now(clock);
    // Times are >= 0 and NO_TIME is -2^63; a small negative is -errno.
    if t < 0 && t != NO_TIME && t >= -(1i64 << 31) {
        return Err(Error::host("time_now", "", abi::Errno((-t) as i32)));
    }
    Ok(t)
}

/// Asks for one call of the commit function for `key` at the end of the
/// current commit window; the same as `wasmstream::commit_mark`.
pub fn mark(key: &[u8]) -> Result<bool> {
    crate::commit_mark(key)
}

/// The argument of the timer function: a due timer. Emits during the call
/// default to its time.
pub struct Firing<'a> {
    t: abi::Trigger<'a>,
}

impl<'a> Firing<'a> {
    /// `EVENT_TIME` or `PROCESSING_TIME`.
    pub fn kind(&self) -> Kind {
        self.t.kind
    }
    /// The timer's time.
    pub fn time(&self) -> i64 {
        self.t.timestamp
    }
    /// The timer's key.
    pub fn key(&self) -> &'a [u8] {
        self.t.key
    }
    /// The task's stream time as this call sees it, or `NO_TIME`.
    pub fn stream_time(&self) -> i64 {
        self.t.stream_time
    }
    /// The host's wall clock for this call.
    pub fn wall_time(&self) -> i64 {
        self.t.wall_time
    }
}

/// The body of wasmstream_on_timer (the `processor!` macro's `on_timer`):
/// decode the trigger of `len` bytes in the input buffer and run the timer
/// function on it.
#[doc(hidden)]
pub fn __on_timer<F: Fn(&Firing<'_>) -> Result<()>>(len: u32, f: F) -> i32 {
    match crate::__rt::input_bytes(len) {
        Some(src) => run_timer(src, f),
        None => crate::__rt::fail("sdk: trigger length is beyond the input buffer"),
    }
}

/// Runs the timer function on the trigger `src`: the one path of
/// wasmstream_on_timer and of a batch's timer triggers.
pub(crate) fn run_timer<F: Fn(&Firing<'_>) -> Result<()>>(src: &[u8], f: F) -> i32 {
    let t = match abi::decode_trigger(src) {
        Some(t) if t.kind == EVENT_TIME || t.kind == PROCESSING_TIME => t,
        _ => return crate::__rt::fail("sdk: on_timer: abi: malformed timer trigger"),
    };
    crate::__rt::set_input_timestamp(t.timestamp);
    let res = f(&Firing { t });
    crate::__rt::set_input_timestamp(0);
    match res {
        Ok(()) => abi::STATUS_OK,
        Err(e) => crate::__rt::fail_err(&e),
    }
}
