//! An in-process fake of the wasmstream host, so a processor is unit-tested
//! with plain `cargo test` (native targets only):
//!
//! ```text
//! use wasmstream::testing::{Host, Input};
//!
//! let mut h = Host::new(process).outputs(&["out"]).stores(&["counts"]).config("{}");
//! h.start().unwrap();                        // runs the init function
//! let res = h.process(&Input::kv("k", "v")); // one record
//! assert!(res.error.is_none());
//! assert_eq!(res.emitted[0].value.as_deref(), Some(&b"v"[..]));
//! assert_eq!(h.get("counts", b"k"), Some(b"1".to_vec()));
//! ```
//!
//! The record goes through the same SDK code as in Wasm: it is encoded in
//! the ABI record layout, written into the buffer the SDK hands out
//! (wasmstream_input) and processed by the body of wasmstream_process; every
//! host call crosses the same functions. The fake keeps the host's semantics
//! of abi/ABI.md: declared outputs and stores only (ENONAME, ENOOUTPUT,
//! ENOSTORE), no emit or state during init (EPHASE), the size limits
//! (ETOOLARGE), null distinct from empty, reads that see the record's staged
//! writes, scans in byte order with "written only when it fits", at most
//! MAX_OPEN_CURSORS cursors (ELIMIT), and a failed call's emits, state
//! writes, timer changes and marks discarded as a whole.
//!
//! **Time** (abi/ABI.md section 8) is faked as the Go SDK's sdktest does.
//! The stream time moves with the records (the largest non-negative
//! timestamp, including the record being processed); the wall clock moves
//! only when the test says (`set_wall_time`, `advance_wall_time`) and starts
//! at `DEFAULT_WALL_TIME` (`with_wall_time`). After every record the due event-time timers
//! fire; at a commit point (`commit`, `advance_wall_time`, or every n
//! records with `commit_every`) the due timers of both kinds fire, then the
//! commit function runs once per marked key in key order, then expired
//! entries of stores with a TTL are deleted. Processing-time timers never
//! fire between records here, which the host may do but need not: a
//! processor whose tests pass here does not depend on it. Timers fire in
//! `abi::timer_order`; a timer a callback sets that is already due waits for
//! the next check; at most the firings limit fire per commit window and the
//! rest wait, in order. Each callback is one call, like a record: a failed
//! one's emits, state writes, timer changes and marks are discarded, and,
//! as under the host's "skip" policy, a timer whose callback failed stays
//! removed. A test sees each callback in `Outcome::callbacks`.
//!
//! **Store expiry** (abi/ABI.md section 8.7): `ttl` gives a store a time to
//! live on the stream or wall clock; each write stamps the entry with the
//! clock at that call (a stream time of NO_TIME stamps 0), the processor
//! stops reading an entry once the clock is at its stamp plus the TTL, and
//! commit points delete it.
//!
//! **Batches** (abi/ABI.md section 10): `process_batch` hands records to
//! the SDK's wasmstream_batch as a host that speaks version 2 does, and
//! gives the same outcome per record as `process` one at a time. Like the
//! host, the fake learns that a call ended from the batch's done count,
//! which it reads at every host call, so each host call belongs to the
//! call in progress; it reads each call's staged emits through the emit
//! import's checks, cuts a batch after a failed call or after a record
//! that leaves a check due, and hands the rest again. `batch_raw` runs one
//! batch given as bytes (the shared vectors).
//!
//! Each Host is a fresh instance on the calling thread; tests on different
//! threads (cargo test's default) do not share anything.

use crate::abi::{self, Errno};
use crate::timer::Firing;
use crate::{Commit, Handle, Record, Result};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};

/// The fake wall clock at start, ms since the Unix epoch:
/// 2024-01-01T00:00:00Z (as the Go SDK's sdktest).
pub const DEFAULT_WALL_TIME: i64 = 1_704_067_200_000;

/// An input record. `None` is null.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Input {
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    pub timestamp: i64,
    pub partition: i32,
    pub offset: i64,
    /// The index of the record's topic among the processor's inputs.
    pub input: u32,
}

impl Input {
    /// A record with this key and value, the rest zero.
    pub fn kv<K: AsRef<[u8]>, V: AsRef<[u8]>>(key: K, value: V) -> Input {
        Input { key: Some(key.as_ref().to_vec()), value: Some(value.as_ref().to_vec()), ..Input::default() }
    }

    /// The record's ABI encoding.
    pub fn encode(&self) -> Vec<u8> {
        let hs: Vec<abi::Header<'_>> =
            self.headers.iter().map(|(n, v)| abi::Header { name: n, value: v.as_deref() }).collect();
        let mut b = Vec::new();
        abi::encode(
            &mut b,
            self.timestamp,
            self.offset,
            self.partition,
            self.input,
            self.key.as_deref(),
            self.value.as_deref(),
            &hs,
        );
        b
    }
}

/// One record the processor emitted (copies).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Emitted {
    pub output: String,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    pub timestamp: i64,
    /// `abi::ANY_PARTITION` unless the processor chose one.
    pub partition: i32,
    /// The exact bytes the processor passed to emit.
    pub raw: Vec<u8>,
}

/// One timer or commit callback a step ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Callback {
    /// `abi::TIMER_EVENT_TIME`, `abi::TIMER_PROCESSING_TIME` or
    /// `abi::TRIGGER_COMMIT`.
    pub kind: u32,
    /// The timer's time, or for a commit the timestamp of the call that
    /// marked the key last.
    pub time: i64,
    pub key: Vec<u8>,
    /// `None` if the callback succeeded, else its error.
    pub error: Option<String>,
    /// What the callback emitted; empty if it failed.
    pub emitted: Vec<Emitted>,
}

/// The outcome of one step: a record (and the callbacks after it), or a
/// commit point.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// What wasmstream_process returned (0 for a commit point).
    pub status: i32,
    /// `None` when the record succeeded; else the processor's set_error
    /// text, or why the host failed the record. The record's alone: each
    /// callback has its own.
    pub error: Option<String>,
    /// The emitted records of every call of the step that succeeded, in
    /// emit order: the record's, then those of the callbacks. A failed
    /// call's are discarded, as the host does.
    pub emitted: Vec<Emitted>,
    /// The timer and commit callbacks the step ran, in order.
    pub callbacks: Vec<Callback>,
}

impl Outcome {
    /// The first error of the step: the record's, or else the first failed
    /// callback's; `None` if every call succeeded.
    pub fn failed(&self) -> Option<String> {
        if let Some(e) = &self.error {
            return Some(e.clone());
        }
        self.callbacks.iter().find_map(|c| {
            c.error.as_ref().map(|e| {
                format!(
                    "{} callback for key {:?} at {}: {}",
                    kind_name(c.kind),
                    String::from_utf8_lossy(&c.key),
                    c.time,
                    e
                )
            })
        })
    }

    /// The emitted records of one output, in emit order.
    pub fn to(&self, output: &str) -> Vec<&Emitted> {
        self.emitted.iter().filter(|e| e.output == output).collect()
    }

    fn add(&mut self, o: Outcome) {
        self.emitted.extend(o.emitted);
        self.callbacks.extend(o.callbacks);
    }
}

fn kind_name(kind: u32) -> &'static str {
    match kind {
        abi::TIMER_EVENT_TIME => "event",
        abi::TIMER_PROCESSING_TIME => "processing",
        abi::TRIGGER_COMMIT => "commit",
        _ => "unknown",
    }
}

/// One line the processor logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Log {
    pub level: u32,
    pub msg: String,
}

/// A pending timer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timer {
    pub kind: u32,
    pub time: i64,
    pub key: Vec<u8>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle,
    Init,
    Record,
    Timer,
    Commit,
    /// wasmstream_migrate: state only (emit and timers get EPHASE).
    Migrate,
}

struct Cursor {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    pos: usize,
}

/// A stored value and the stamp of the write that set it (the store's
/// clock then; used only with a TTL).
#[derive(Clone)]
struct Entry {
    value: Vec<u8>,
    stamp: i64,
}

type Data = BTreeMap<Vec<u8>, Entry>;

/// A timer as the fake keeps it: its order is abi::timer_order.
type TimerId = (i64, u32, Vec<u8>);

/// What a call changes that a failure discards.
#[derive(Clone)]
struct Staged {
    data: Vec<Data>,
    timers: BTreeSet<TimerId>,
    marks: BTreeMap<Vec<u8>, i64>,
}

#[derive(Default)]
struct Fake {
    outputs: Vec<String>,
    stores: Vec<String>,
    data: Vec<Data>,
    /// Per store: its TTL in ms (0: none) and its clock.
    ttl: Vec<(i64, u32)>,
    config: Vec<u8>,
    logs: Vec<Log>,
    phase: Option<Phase>,
    err_msg: Option<String>,
    host_fail: Option<String>,
    emitted: Vec<Emitted>,
    cursors: BTreeMap<u32, Cursor>,
    next_cursor: u32,
    fault: Option<fn(&str) -> Option<Errno>>,

    /// The largest record timestamp seen (>= 0), or abi::NO_TIME.
    stream_time: i64,
    wall_time: i64,
    /// Pending timers, in firing order.
    timers: BTreeSet<TimerId>,
    /// The keys marked in the window, with the timestamp of their last mark.
    marks: BTreeMap<Vec<u8>, i64>,
    /// The timestamp a mark made now remembers (the record's, the timer's).
    call_ts: i64,
    /// limits.timers, limits.timer_firings, limits.commit_marks; 0 until
    /// set means the abi defaults.
    max_timers: usize,
    max_firings: usize,
    max_marks: usize,
    /// Timers fired in this commit window; records since the last commit
    /// point, and how many make one (0: only when the test says).
    fired: usize,
    records: usize,
    commit_every: usize,
    /// The clocks time_now returns in a trigger of a batch: the trigger's
    /// own (abi/ABI.md section 10.2).
    call_clocks: Option<(i64, i64)>,
    /// The batch the SDK is running, if any.
    batch: Option<BatchRun>,
}

/// A wasmstream_batch call in progress, as the host sees it (abi/ABI.md
/// section 10): it learns that calls ended from the batch's done count,
/// which it reads at every host call (`sync`) and when the batch returns.
struct BatchRun {
    /// The batch in the SDK's input buffer.
    base: *mut u8,
    len: usize,
    /// Each slot's offset, kind and payload range.
    slots: Vec<(usize, u32, core::ops::Range<usize>)>,
    /// Calls whose end the fake has seen (done as last read), whether the
    /// one at `seen` has begun, and the first call that does not run (its
    /// host calls get EPHASE and its results are ignored).
    seen: usize,
    began: bool,
    cut: usize,
    /// What a failure of the call in progress puts back.
    saved: Option<Staged>,
    /// Cut after each record that leaves a check to run (a due event-time
    /// timer, a commit point), as the host does; records ended so far.
    checks: bool,
    records: usize,
    /// The outcomes of the calls that ended and ran.
    ended: Vec<Outcome>,
}

impl Fake {
    fn limit(n: usize, default: usize) -> usize {
        if n == 0 {
            default
        } else {
            n
        }
    }

    fn in_call(&self) -> bool {
        matches!(self.phase, Some(Phase::Record) | Some(Phase::Timer) | Some(Phase::Commit) | Some(Phase::Migrate))
    }

    /// The clock store i's TTL is measured on, now.
    fn clock(&self, i: usize) -> i64 {
        if self.ttl[i].1 == abi::CLOCK_WALL {
            self.wall_time
        } else {
            self.stream_time.max(0)
        }
    }

    fn expired(&self, i: usize, e: &Entry) -> bool {
        let ttl = self.ttl[i].0;
        ttl > 0 && self.clock(i) >= e.stamp.saturating_add(ttl)
    }

    fn read(&self, i: usize, key: &[u8]) -> Option<&Vec<u8>> {
        match self.data[i].get(key) {
            Some(e) if !self.expired(i, e) => Some(&e.value),
            _ => None,
        }
    }

    fn write(&mut self, i: usize, key: &[u8], value: &[u8]) {
        let stamp = self.clock(i);
        self.data[i].insert(key.to_vec(), Entry { value: value.to_vec(), stamp });
    }

    /// An emitted record as the emit import checks it: the errno it
    /// returns, and for one that fails the record, why.
    fn emitted_of(&self, rec: &[u8]) -> core::result::Result<Emitted, (Errno, Option<String>)> {
        if rec.len() > abi::MAX_RECORD_SIZE {
            return Err((Errno::TOOLARGE, None));
        }
        let d = match abi::decode(rec) {
            Some(d) => d,
            None => return Err((Errno::INVAL, None)),
        };
        if d.index as usize >= self.outputs.len() {
            return Err((Errno::NOOUTPUT, Some(format!("emit to undeclared output index {}", d.index))));
        }
        Ok(Emitted {
            output: self.outputs[d.index as usize].clone(),
            key: d.key.map(|k| k.to_vec()),
            value: d.value.map(|v| v.to_vec()),
            headers: d.headers().map(|h| (h.name.to_vec(), h.value.map(|v| v.to_vec()))).collect(),
            timestamp: d.timestamp,
            partition: d.partition,
            raw: rec.to_vec(),
        })
    }

    /// Starts a call: no error, emits or cursors yet.
    fn begin(&mut self, p: Phase) {
        self.phase = Some(p);
        self.err_msg = None;
        self.host_fail = None;
        self.emitted.clear();
        self.cursors.clear();
    }

    /// Ends a call that returned `status`: its error, if any, and its
    /// emits (none when it failed).
    fn finish(&mut self, status: i32) -> (Option<String>, Vec<Emitted>) {
        self.phase = Some(Phase::Idle);
        self.cursors.clear();
        let emitted = std::mem::take(&mut self.emitted);
        let err = if let Some(h) = self.host_fail.take() {
            Some(h)
        } else if status == abi::STATUS_OK {
            None
        } else if status == abi::STATUS_FAILED {
            Some(self.err_msg.take().unwrap_or_else(|| "failed without set_error".to_string()))
        } else {
            Some(format!("ABI misuse: unknown status {}", status))
        };
        if err.is_some() {
            return (err, Vec::new());
        }
        (None, emitted)
    }

    /// A check is due after a record: an event-time timer at or before
    /// the stream time, or a commit point after `records` more records.
    fn check_due(&self, records: usize) -> bool {
        self.timers.iter().any(|(ts, kind, _)| *kind == abi::TIMER_EVENT_TIME && *ts <= self.stream_time)
            || (self.commit_every > 0 && self.records + records >= self.commit_every)
    }

    /// Brings the running batch up to date (at every host call): ends the
    /// calls the SDK finished since the last look, then begins the one in
    /// progress. `begin_next` is false once the batch call returned.
    fn sync(&mut self, begin_next: bool) {
        let (done, n) = match &self.batch {
            Some(b) => (unsafe { core::ptr::read_volatile(b.base.add(abi::BATCH_DONE) as *const u32) }, b.slots.len()),
            None => return,
        };
        let done = u32::from_le(done) as usize;
        let seen = self.batch.as_ref().map_or(0, |b| b.seen);
        assert!(
            done <= n && done >= seen,
            "wasmstream::testing: the SDK moved the batch's done count from {} to {} ({} calls)",
            seen,
            done,
            n
        );
        for k in seen..done {
            self.end_slot(k);
        }
        if begin_next && done < n {
            self.begin_slot(done);
        }
    }

    /// Begins call k of the batch (once): the record moves the stream
    /// time; a trigger's clocks are its own. A call past the cut runs
    /// without a phase: its host calls get EPHASE.
    fn begin_slot(&mut self, k: usize) {
        let b = self.batch.as_mut().unwrap();
        if b.began {
            return;
        }
        b.began = true;
        if k >= b.cut {
            self.phase = Some(Phase::Idle);
            return;
        }
        let (_, kind, p) = b.slots[k].clone();
        let payload = unsafe { core::slice::from_raw_parts(b.base.add(p.start) as *const u8, p.len()) };
        let phase = if kind == abi::SLOT_RECORD {
            let ts = if payload.len() >= 8 {
                i64::from_le_bytes([payload[0], payload[1], payload[2], payload[3], payload[4], payload[5], payload[6], payload[7]])
            } else {
                0
            };
            if ts >= 0 && ts > self.stream_time {
                self.stream_time = ts;
            }
            self.call_ts = ts;
            self.call_clocks = None;
            Phase::Record
        } else {
            let t = abi::decode_trigger(payload);
            self.call_ts = t.map_or(0, |t| t.timestamp);
            self.call_clocks = t.map(|t| (t.stream_time, t.wall_time));
            match t {
                Some(t) if t.kind == abi::TRIGGER_COMMIT => Phase::Commit,
                _ => Phase::Timer,
            }
        };
        let saved = self.staged();
        self.batch.as_mut().unwrap().saved = Some(saved);
        self.begin(phase);
    }

    /// Ends call k, which the SDK finished: its staged emits go through
    /// the emit import's checks (one refused fails the call), then its
    /// outcome. A failed call, or a record after which a check is due,
    /// cuts the batch there.
    fn end_slot(&mut self, k: usize) {
        self.begin_slot(k);
        let b = self.batch.as_mut().unwrap();
        b.seen = k + 1;
        b.began = false;
        if k >= b.cut {
            return;
        }
        let (off, kind, _) = b.slots[k].clone();
        let slot = unsafe { core::slice::from_raw_parts(b.base.add(off) as *const u8, abi::SLOT_HEADER_SIZE) };
        let u32_at = |p: usize| u32::from_le_bytes([slot[p], slot[p + 1], slot[p + 2], slot[p + 3]]);
        let status = u32_at(abi::SLOT_STATUS) as i32;
        let (out, out_len) = (u32_at(abi::SLOT_OUT_PTR), u32_at(abi::SLOT_OUT_LEN) as usize);
        let saved = b.saved.take();
        if out_len > 0 {
            let at = ADDRESSES.with(|a| a.borrow().get((out as usize).wrapping_sub(1)).copied());
            let at = at.unwrap_or_else(|| panic!("wasmstream::testing: staged emits at an address the SDK never handed out ({})", out));
            let mut run = unsafe { core::slice::from_raw_parts(at as *const u8, out_len) };
            while !run.is_empty() && self.host_fail.is_none() {
                let (rec, rest) = match abi::next_emit_entry(run) {
                    Some(e) => e,
                    None => {
                        self.host_fail = Some("ABI misuse: staged emits: an entry's length runs past the run".into());
                        break;
                    }
                };
                run = rest;
                match self.emitted_of(rec) {
                    Ok(e) => self.emitted.push(e),
                    Err((e, msg)) => {
                        self.host_fail = Some(msg.unwrap_or_else(|| format!("staged emit refused: {}", e)));
                    }
                }
            }
        }
        let (error, emitted) = self.finish(status);
        self.call_clocks = None;
        let failed = error.is_some();
        if failed {
            if let Some(s) = saved {
                self.restore(s);
            }
        }
        let b = self.batch.as_mut().unwrap();
        if kind == abi::SLOT_RECORD {
            b.records += 1;
        }
        let records = b.records;
        b.ended.push(Outcome { status, error, emitted, callbacks: Vec::new() });
        let checks = b.checks && kind == abi::SLOT_RECORD;
        if failed || (checks && self.check_due(records)) {
            let b = self.batch.as_mut().unwrap();
            b.cut = b.cut.min(k + 1);
            unsafe { core::ptr::write_volatile(b.base.add(abi::BATCH_STOP) as *mut u32, 1u32.to_le()) };
        }
    }

    fn staged(&self) -> Staged {
        Staged { data: self.data.clone(), timers: self.timers.clone(), marks: self.marks.clone() }
    }

    fn restore(&mut self, s: Staged) {
        self.data = s.data;
        self.timers = s.timers;
        self.marks = s.marks;
    }
}

thread_local! {
    static ACTIVE: RefCell<Option<Rc<RefCell<Fake>>>> = RefCell::new(None);
    /// The addresses the SDK handed out (sys::address) in the running
    /// batch; handle h is entry h - 1.
    static ADDRESSES: RefCell<Vec<usize>> = RefCell::new(Vec::new());
}

static GENERATIONS: AtomicU32 = AtomicU32::new(1);

/// A fake host running one processor instance on this thread.
pub struct Host<F: Fn(&Record<'_>) -> Result<()>> {
    process: F,
    init: fn() -> Result<()>,
    handles: Vec<&'static dyn Handle>,
    on_timer: Option<fn(&Firing<'_>) -> Result<()>>,
    on_commit: Option<fn(&Commit<'_>) -> Result<()>>,
    fake: Rc<RefCell<Fake>>,
    gen: u32,
    started: bool,
}

impl<F: Fn(&Record<'_>) -> Result<()>> Host<F> {
    /// A host for the processor `process`, with no outputs, stores or
    /// config until the builder methods declare them.
    pub fn new(process: F) -> Host<F> {
        Host {
            process,
            init: crate::__rt::no_init,
            handles: Vec::new(),
            on_timer: None,
            on_commit: None,
            fake: Rc::new(RefCell::new(Fake {
                stream_time: abi::NO_TIME,
                wall_time: DEFAULT_WALL_TIME,
                ..Fake::default()
            })),
            gen: GENERATIONS.fetch_add(1, Ordering::Relaxed) + 1,
            started: false,
        }
    }

    /// Declares the outputs; indices are given in sorted name order, as the
    /// host does.
    pub fn outputs(self, names: &[&str]) -> Self {
        {
            let mut f = self.fake.borrow_mut();
            f.outputs = sorted(names);
        }
        self
    }

    /// Declares the state stores.
    pub fn stores(self, names: &[&str]) -> Self {
        {
            let mut f = self.fake.borrow_mut();
            f.stores = sorted(names);
            f.data = f.stores.iter().map(|_| BTreeMap::new()).collect();
            f.ttl = f.stores.iter().map(|_| (0, abi::CLOCK_STREAM)).collect();
        }
        self
    }

    /// Gives the store `name` (declared with `stores` first) a time to live
    /// of `ms` on `clock` (`abi::CLOCK_STREAM` or `abi::CLOCK_WALL`), as a
    /// processor's `expire` config does (abi/ABI.md section 8.7).
    pub fn ttl(self, name: &str, ms: i64, clock: u32) -> Self {
        {
            let mut f = self.fake.borrow_mut();
            let i = f.stores.iter().position(|s| s == name).unwrap_or_else(|| {
                panic!("wasmstream::testing: ttl for {:?}, which is not declared with stores", name)
            });
            f.ttl[i] = (ms, clock);
        }
        self
    }

    /// Sets the config the config import serves (empty without it).
    pub fn config(self, json: &str) -> Self {
        self.fake.borrow_mut().config = json.as_bytes().to_vec();
        self
    }

    /// Sets the init function (the second argument of `processor!`).
    pub fn init(mut self, init: fn() -> Result<()>) -> Self {
        self.init = init;
        self
    }

    /// Sets the handles resolved at start (`handles = [..]` of
    /// `processor!`).
    pub fn handles(mut self, handles: &[&'static dyn Handle]) -> Self {
        self.handles = handles.to_vec();
        self
    }

    /// Sets the timer function (`on_timer = f` of `processor!`).
    pub fn on_timer(mut self, f: fn(&Firing<'_>) -> Result<()>) -> Self {
        self.on_timer = Some(f);
        self
    }

    /// Sets the commit function (`on_commit = f` of `processor!`).
    pub fn on_commit(mut self, f: fn(&Commit<'_>) -> Result<()>) -> Self {
        self.on_commit = Some(f);
        self
    }

    /// Sets limits.commit_marks, the distinct keys one window may mark
    /// (default abi::DEFAULT_MAX_COMMIT_MARKS).
    pub fn commit_marks(self, n: usize) -> Self {
        self.fake.borrow_mut().max_marks = n;
        self
    }

    /// Sets the time limits of abi/ABI.md section 8.6: pending timers per
    /// task, timer firings per commit window, marked keys per commit
    /// window. 0 keeps a limit's default.
    pub fn timer_limits(self, timers: usize, firings_per_commit: usize, commit_marks: usize) -> Self {
        {
            let mut f = self.fake.borrow_mut();
            f.max_timers = timers;
            f.max_firings = firings_per_commit;
            f.max_marks = commit_marks;
        }
        self
    }

    /// Runs a commit point after every n records, as the host does at its
    /// commit interval; its callbacks join that record's outcome. Default
    /// 0: commit points run only when the test calls `commit` or
    /// `advance_wall_time`.
    pub fn commit_every(self, n: usize) -> Self {
        self.fake.borrow_mut().commit_every = n;
        self
    }

    /// Sets the wall clock at start, ms since the epoch (default
    /// `DEFAULT_WALL_TIME`).
    pub fn with_wall_time(self, ms: i64) -> Self {
        self.fake.borrow_mut().wall_time = ms;
        self
    }

    /// Starts the task with a stream time, as a task restored from a
    /// changelog would (default: none, `abi::NO_TIME`).
    pub fn with_stream_time(self, ms: i64) -> Self {
        self.fake.borrow_mut().stream_time = ms;
        self
    }

    /// Injects host errors: `f` is called before every host call with the
    /// import's name and returns the errno to answer instead, or `None`. EIO
    /// and EFAULT also fail the record, as on the real host.
    pub fn fault(self, f: fn(&str) -> Option<Errno>) -> Self {
        self.fake.borrow_mut().fault = Some(f);
        self
    }

    fn activate(&self) {
        ACTIVE.with(|a| *a.borrow_mut() = Some(self.fake.clone()));
        crate::__rt::new_instance(self.gen);
    }

    /// Starts the instance: resolves the handles, runs the init function,
    /// then asks for the input buffer (abi/ABI.md section 3). The error is
    /// init's set_error text.
    pub fn start(&mut self) -> core::result::Result<(), String> {
        self.activate();
        self.begin(Phase::Init);
        let st = crate::__init(&self.handles, self.init);
        let (err, _) = self.end(st);
        if let Some(e) = err {
            return Err(e);
        }
        crate::__rt::input(4096);
        self.started = true;
        Ok(())
    }

    fn ensure_started(&mut self) {
        if !self.started {
            if let Err(e) = self.start() {
                panic!("wasmstream::testing: init failed: {}", e);
            }
        }
        self.activate();
    }

    /// Processes one record (starting the instance first if needed; a
    /// failing init panics) after moving the stream time to its timestamp;
    /// then the event-time timers it made due fire and, with
    /// `commit_every`, a commit point runs. Their callbacks are part of the
    /// outcome.
    pub fn process(&mut self, rec: &Input) -> Outcome {
        self.process_raw(&rec.encode())
    }

    /// Processes the raw bytes `raw` as a record (for malformed input), as
    /// `process` does.
    pub fn process_raw(&mut self, raw: &[u8]) -> Outcome {
        self.ensure_started();
        let ptr = crate::__rt::input(raw.len() as u32);
        assert!(!ptr.is_null(), "wasmstream::testing: the SDK refused a {}-byte input buffer", raw.len());
        unsafe { core::ptr::copy_nonoverlapping(raw.as_ptr(), ptr, raw.len()) };
        let ts = if raw.len() >= 8 {
            let mut b = [0u8; 8];
            b.copy_from_slice(&raw[..8]);
            i64::from_le_bytes(b)
        } else {
            0
        };
        {
            let mut f = self.fake.borrow_mut();
            if ts >= 0 && ts > f.stream_time {
                f.stream_time = ts;
            }
            f.call_ts = ts;
        }
        let saved = self.fake.borrow().staged();
        self.begin(Phase::Record);
        let st = crate::__rt::process(raw.len() as u32, &self.process);
        let (error, emitted) = self.end(st);
        if error.is_some() {
            self.fake.borrow_mut().restore(saved);
        }
        let mut out = Outcome { status: st, error, emitted, callbacks: Vec::new() };
        self.after_record(&mut out);
        out
    }

    /// The check after a record, and the commit point if one is due.
    fn after_record(&mut self, out: &mut Outcome) {
        self.fire_due(out, false);
        let due = {
            let mut f = self.fake.borrow_mut();
            f.records += 1;
            f.commit_every > 0 && f.records >= f.commit_every
        };
        if due {
            let c = self.commit();
            out.add(c);
        }
    }

    /// A check: the timers due at its start fire, event-time ones always,
    /// processing-time ones at a commit point.
    fn fire_due(&mut self, out: &mut Outcome, commit_point: bool) {
        let due: Vec<TimerId> = {
            let f = self.fake.borrow();
            f.timers
                .iter()
                .filter(|(ts, kind, _)| {
                    (*kind == abi::TIMER_EVENT_TIME && *ts <= f.stream_time)
                        || (commit_point && *kind == abi::TIMER_PROCESSING_TIME && *ts <= f.wall_time)
                })
                .cloned()
                .collect()
        };
        for id in due {
            {
                let mut f = self.fake.borrow_mut();
                if f.fired >= Fake::limit(f.max_firings, abi::DEFAULT_MAX_FIRINGS_PER_COMMIT) {
                    return; // the rest fire in the next window
                }
                if !f.timers.remove(&id) {
                    continue; // cancelled by an earlier callback of this check
                }
                f.fired += 1; // removed whatever the callback does
            }
            let (ts, kind, key) = id;
            self.callback(out, kind, ts, key);
        }
    }

    /// Runs one on_timer or on_commit call and adds it to out.
    fn callback(&mut self, out: &mut Outcome, kind: u32, ts: i64, key: Vec<u8>) {
        let mut enc = Vec::new();
        {
            let mut f = self.fake.borrow_mut();
            let t = abi::Trigger { timestamp: ts, stream_time: f.stream_time, wall_time: f.wall_time, kind, key: &key };
            abi::encode_trigger(&mut enc, &t);
            f.call_ts = ts;
        }
        let ptr = crate::__rt::input(enc.len() as u32);
        assert!(!ptr.is_null(), "wasmstream::testing: the SDK refused a {}-byte input buffer", enc.len());
        unsafe { core::ptr::copy_nonoverlapping(enc.as_ptr(), ptr, enc.len()) };
        let saved = self.fake.borrow().staged();
        let st = if kind == abi::TRIGGER_COMMIT {
            let f = self.on_commit.unwrap_or_else(|| {
                panic!("wasmstream::testing: a key was marked but the Host has no on_commit (processor!'s on_commit = f)")
            });
            self.begin(Phase::Commit);
            crate::__rt::on_commit(enc.len() as u32, f)
        } else {
            let f = self.on_timer.unwrap_or_else(|| {
                panic!("wasmstream::testing: a timer is due but the Host has no on_timer (processor!'s on_timer = f)")
            });
            self.begin(Phase::Timer);
            crate::timer::__on_timer(enc.len() as u32, f)
        };
        let (error, emitted) = self.end(st);
        if error.is_some() {
            self.fake.borrow_mut().restore(saved);
        }
        out.emitted.extend(emitted.iter().cloned());
        out.callbacks.push(Callback { kind, time: ts, key, error, emitted });
    }

    /// Runs the state migration `f` (`migrate!(f)`) as the host does when
    /// the task's stores were last written by version `from` (abi/ABI.md
    /// section 13): its state writes stay if it succeeds and are dropped
    /// if it fails; emits and timers get EPHASE.
    pub fn migrate(&mut self, from: &str, f: fn(&str) -> Result<()>) -> Outcome {
        self.ensure_started();
        let ptr = crate::__rt::input(from.len() as u32);
        assert!(!ptr.is_null(), "wasmstream::testing: the SDK refused a {}-byte input buffer", from.len());
        unsafe { core::ptr::copy_nonoverlapping(from.as_ptr(), ptr, from.len()) };
        let saved = self.fake.borrow().staged();
        self.begin(Phase::Migrate);
        let st = crate::__rt::migrate(from.len() as u32, f);
        let (error, emitted) = self.end(st);
        if error.is_some() {
            self.fake.borrow_mut().restore(saved);
        }
        Outcome { status: st, error, emitted, callbacks: Vec::new() }
    }

    /// Runs a commit point: the due timers of both kinds fire (up to the
    /// firings limit of the window), then the commit function runs for
    /// every key marked in the window, in key byte order; then expired
    /// entries are deleted and a new window starts.
    pub fn commit(&mut self) -> Outcome {
        self.ensure_started();
        let mut out = Outcome::default();
        self.fire_due(&mut out, true);
        let marks = std::mem::take(&mut self.fake.borrow_mut().marks);
        for (key, ts) in marks {
            self.callback(&mut out, abi::TRIGGER_COMMIT, ts, key);
        }
        let mut f = self.fake.borrow_mut();
        f.fired = 0;
        f.records = 0;
        for i in 0..f.data.len() {
            let data = std::mem::take(&mut f.data[i]);
            let kept = data.into_iter().filter(|(_, e)| !f.expired(i, e)).collect();
            f.data[i] = kept;
        }
        out
    }

    /// The task's stream time: the largest non-negative record timestamp
    /// processed so far, or `abi::NO_TIME`.
    pub fn stream_time(&self) -> i64 {
        self.fake.borrow().stream_time
    }

    /// The fake wall clock, ms since the epoch.
    pub fn wall_time(&self) -> i64 {
        self.fake.borrow().wall_time
    }

    /// Sets the wall clock without running a check: due processing-time
    /// timers fire at the next commit point. It may not go back (the
    /// host's does not): that panics.
    pub fn set_wall_time(&mut self, ms: i64) {
        let mut f = self.fake.borrow_mut();
        assert!(
            ms >= f.wall_time,
            "wasmstream::testing: set_wall_time({}) would move the wall clock back from {}",
            ms,
            f.wall_time
        );
        f.wall_time = ms;
    }

    /// Moves the wall clock forward by `ms` and runs a commit point, as the
    /// host does at least once per commit interval, so that the
    /// processing-time timers due by then fire.
    pub fn advance_wall_time(&mut self, ms: i64) -> Outcome {
        let now = self.wall_time();
        self.set_wall_time(now + ms);
        self.commit()
    }

    /// The pending timers, in firing order.
    pub fn timers(&self) -> Vec<Timer> {
        self.fake.borrow().timers.iter().map(|(time, kind, key)| Timer { kind: *kind, time: *time, key: key.clone() }).collect()
    }

    /// The keys marked in the current commit window, in the order their
    /// commit calls will run.
    pub fn marked(&self) -> Vec<Vec<u8>> {
        self.fake.borrow().marks.keys().cloned().collect()
    }

    fn begin(&self, p: Phase) {
        self.fake.borrow_mut().begin(p);
    }

    fn end(&self, status: i32) -> (Option<String>, Vec<Emitted>) {
        self.fake.borrow_mut().finish(status)
    }

    /// Processes records through the SDK's wasmstream_batch (abi/ABI.md
    /// section 10), as a host that speaks version 2 does, with the same
    /// outcome per record as `process` one at a time: each record moves
    /// the stream time as its call begins; a batch is cut after a record
    /// that failed or after which a check is due (a due event-time timer,
    /// `commit_every`), the check runs (its callbacks one at a time, in
    /// that record's outcome), and the rest go on in a new batch, as does
    /// the rest of a batch the SDK returned early from.
    pub fn process_batch(&mut self, recs: &[Input]) -> Vec<Outcome> {
        self.ensure_started();
        let encoded: Vec<Vec<u8>> = recs.iter().map(|r| r.encode()).collect();
        let mut outs = Vec::new();
        while outs.len() < recs.len() {
            let slots: Vec<(u32, &[u8])> = encoded[outs.len()..].iter().map(|e| (abi::SLOT_RECORD, &e[..])).collect();
            let ended = self.run_batch(&slots, true);
            let n = ended.len();
            for (i, mut out) in ended.into_iter().enumerate() {
                if i + 1 < n {
                    // No check was due after it (the batch would have been
                    // cut there), and the records after it have moved the
                    // stream time since.
                    self.fake.borrow_mut().records += 1;
                } else {
                    self.after_record(&mut out);
                }
                outs.push(out);
            }
        }
        outs
    }

    /// Runs one wasmstream_batch call on `batch`, bytes as the host writes
    /// them (abi/ABI.md section 10.1; records, triggers, both), and returns
    /// the outcomes of the calls that ran: up to the first that failed, or
    /// as far as the SDK went. Records move the stream time; no check runs
    /// after them. For the shared vectors and tests of the layout itself.
    pub fn batch_raw(&mut self, batch: &[u8]) -> Vec<Outcome> {
        self.ensure_started();
        let slots = abi::decode_batch(batch).expect("wasmstream::testing: batch_raw: a malformed batch");
        self.run_batch(&slots, false)
    }

    /// One wasmstream_batch call over `slots`; `checks` cuts after a record
    /// after which a check is due.
    fn run_batch(&mut self, slots: &[(u32, &[u8])], checks: bool) -> Vec<Outcome> {
        let mut enc = Vec::new();
        abi::encode_batch(&mut enc, slots);
        let base = crate::__rt::input(enc.len() as u32);
        assert!(!base.is_null(), "wasmstream::testing: the SDK refused a {}-byte input buffer", enc.len());
        assert_eq!(base as usize % abi::BATCH_ALIGN, 0, "wasmstream::testing: the SDK's input buffer is not 8-byte aligned");
        unsafe { core::ptr::copy_nonoverlapping(enc.as_ptr(), base, enc.len()) };
        let mut layout = Vec::new();
        let mut off = abi::BATCH_HEADER_SIZE;
        for (kind, p) in slots {
            layout.push((off, *kind, off + abi::SLOT_HEADER_SIZE..off + abi::SLOT_HEADER_SIZE + p.len()));
            off += abi::slot_size(p.len());
        }
        ADDRESSES.with(|a| a.borrow_mut().clear());
        self.fake.borrow_mut().batch = Some(BatchRun {
            base,
            len: enc.len(),
            slots: layout,
            seen: 0,
            began: false,
            cut: slots.len(),
            saved: None,
            checks,
            records: 0,
            ended: Vec::new(),
        });
        let ret = crate::__rt::batch(enc.len() as u32, &self.process, self.on_timer, self.on_commit);
        let mut f = self.fake.borrow_mut();
        f.sync(false);
        let b = f.batch.take().unwrap();
        f.phase = Some(Phase::Idle);
        if let Some(s) = b.saved {
            f.restore(s); // a call that made host calls and did not finish
        }
        assert_eq!(ret, 0, "wasmstream::testing: wasmstream_batch returned {}", ret);
        assert!(
            !b.began || b.seen >= b.cut,
            "wasmstream::testing: wasmstream_batch returned in the middle of call {}, which had begun",
            b.seen
        );
        assert!(b.seen > 0, "wasmstream::testing: wasmstream_batch returned without finishing a call ({} bytes)", b.len);
        b.ended
    }

    fn store_index(f: &Fake, store: &str) -> usize {
        f.stores.iter().position(|s| s == store).unwrap_or_else(|| {
            panic!("wasmstream::testing: no store {:?} declared (declared: {:?})", store, f.stores)
        })
    }

    /// The committed value of `key` in `store`. With a TTL, an expired
    /// entry that no commit point has deleted yet is still returned (it is
    /// in the store), though the processor no longer reads it.
    pub fn get(&self, store: &str, key: &[u8]) -> Option<Vec<u8>> {
        let f = self.fake.borrow();
        let i = Self::store_index(&f, store);
        f.data[i].get(key).map(|e| e.value.clone())
    }

    /// Sets a committed value, as if an earlier record had written it
    /// (stamped with the store's clock now).
    pub fn put(&self, store: &str, key: &[u8], value: &[u8]) {
        let mut f = self.fake.borrow_mut();
        let i = Self::store_index(&f, store);
        f.write(i, key, value);
    }

    /// Every committed entry of `store`, in key order.
    pub fn entries(&self, store: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
        let f = self.fake.borrow();
        let i = Self::store_index(&f, store);
        f.data[i].iter().map(|(k, e)| (k.clone(), e.value.clone())).collect()
    }

    /// The lines logged so far.
    pub fn logs(&self) -> Vec<Log> {
        self.fake.borrow().logs.clone()
    }
}

fn sorted(names: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    v.sort();
    v.dedup();
    v
}

/// The host functions `crate::sys` calls natively.
pub(crate) mod fake {
    use super::*;

    fn with<R>(call: &str, f: impl FnOnce(&mut Fake) -> R, faulted: impl FnOnce(Errno) -> R) -> R {
        let fake = ACTIVE.with(|a| a.borrow().clone()).expect(
            "wasmstream: a host call outside a fake host; run processors through wasmstream::testing::Host",
        );
        let mut fk = fake.borrow_mut();
        fk.sync(true);
        if let Some(e) = fk.fault.and_then(|ff| ff(call)) {
            if e == Errno::IO || e == Errno::FAULT {
                fk.host_fail = Some(format!("host: {}: {}", call, e));
            }
            return faulted(e);
        }
        f(&mut fk)
    }

    fn err(e: Errno) -> i32 {
        -e.0
    }

    /// Writes `b` into `out` if it fits; returns its length either way.
    fn write_if_fits(out: &mut [u8], b: &[u8]) -> i32 {
        if b.len() <= out.len() {
            out[..b.len()].copy_from_slice(b);
        }
        b.len() as i32
    }

    /// Emits and state calls: in a record or a callback.
    fn in_record(f: &Fake) -> Option<i32> {
        if !f.in_call() {
            return Some(err(Errno::PHASE));
        }
        None
    }

    fn store(f: &Fake, i: u32) -> Option<i32> {
        if i as usize >= f.stores.len() {
            return Some(err(Errno::NOSTORE));
        }
        None
    }

    pub fn emit(rec: &[u8]) -> i32 {
        with(
            "emit",
            |f| {
                if let Some(r) = in_record(f) {
                    return r;
                }
                if f.phase == Some(Phase::Migrate) {
                    return err(Errno::PHASE);
                }
                match f.emitted_of(rec) {
                    Ok(e) => {
                        f.emitted.push(e);
                        0
                    }
                    Err((e, fail)) => {
                        if fail.is_some() {
                            f.host_fail = fail;
                        }
                        err(e)
                    }
                }
            },
            err,
        )
    }

    fn index(names: &[String], name: &[u8]) -> i32 {
        match names.iter().position(|n| n.as_bytes() == name) {
            Some(i) => i as i32,
            None => err(Errno::NONAME),
        }
    }

    pub fn output_index(name: &[u8]) -> i32 {
        with("output_index", |f| index(&f.outputs, name), err)
    }

    pub fn store_index(name: &[u8]) -> i32 {
        with("store_index", |f| index(&f.stores, name), err)
    }

    pub fn config(out: &mut [u8]) -> i32 {
        with("config", |f| write_if_fits(out, &f.config), err)
    }

    pub fn log(level: u32, msg: &[u8]) -> i32 {
        with(
            "log",
            |f| {
                if level > 3 {
                    return err(Errno::INVAL);
                }
                let m = &msg[..msg.len().min(abi::MAX_LOG_SIZE)];
                f.logs.push(Log { level, msg: String::from_utf8_lossy(m).into_owned() });
                0
            },
            err,
        )
    }

    pub fn set_error(msg: &[u8]) -> i32 {
        with(
            "set_error",
            |f| {
                let m = &msg[..msg.len().min(abi::MAX_LOG_SIZE)];
                f.err_msg = Some(String::from_utf8_lossy(m).into_owned());
                0
            },
            err,
        )
    }

    pub fn state_get(st: u32, key: &[u8], out: &mut [u8]) -> i32 {
        with(
            "state_get",
            |f| {
                if let Some(r) = in_record(f).or_else(|| store(f, st)) {
                    return r;
                }
                if key.len() > abi::MAX_KEY_SIZE {
                    return err(Errno::TOOLARGE);
                }
                match f.read(st as usize, key) {
                    None => err(Errno::NOTFOUND),
                    Some(v) => write_if_fits(out, v),
                }
            },
            err,
        )
    }

    pub fn state_put(st: u32, key: &[u8], value: &[u8]) -> i32 {
        with(
            "state_put",
            |f| {
                if let Some(r) = in_record(f).or_else(|| store(f, st)) {
                    return r;
                }
                if key.len() > abi::MAX_KEY_SIZE || value.len() > abi::MAX_VALUE_SIZE {
                    return err(Errno::TOOLARGE);
                }
                f.write(st as usize, key, value);
                0
            },
            err,
        )
    }

    pub fn state_delete(st: u32, key: &[u8]) -> i32 {
        with(
            "state_delete",
            |f| {
                if let Some(r) = in_record(f).or_else(|| store(f, st)) {
                    return r;
                }
                if key.len() > abi::MAX_KEY_SIZE {
                    return err(Errno::TOOLARGE);
                }
                f.data[st as usize].remove(key);
                0
            },
            err,
        )
    }

    pub fn scan_open(st: u32, start: &[u8], end: &[u8]) -> i32 {
        with(
            "scan_open",
            |f| {
                if let Some(r) = in_record(f).or_else(|| store(f, st)) {
                    return r;
                }
                if start.len() > abi::MAX_KEY_SIZE || end.len() > abi::MAX_KEY_SIZE {
                    return err(Errno::TOOLARGE);
                }
                if f.cursors.len() >= abi::MAX_OPEN_CURSORS {
                    return err(Errno::LIMIT);
                }
                let i = st as usize;
                let entries = f.data[i]
                    .iter()
                    .filter(|(k, e)| {
                        k.as_slice() >= start && (end.is_empty() || k.as_slice() < end) && !f.expired(i, e)
                    })
                    .map(|(k, e)| (k.clone(), e.value.clone()))
                    .collect();
                let id = f.next_cursor;
                f.next_cursor += 1;
                f.cursors.insert(id, Cursor { entries, pos: 0 });
                id as i32
            },
            err,
        )
    }

    pub fn scan_next(cursor: u32, out: &mut [u8]) -> i32 {
        with(
            "scan_next",
            |f| {
                let c = match f.cursors.get_mut(&cursor) {
                    Some(c) => c,
                    None => return err(Errno::NOCURSOR),
                };
                if c.pos == c.entries.len() {
                    return 0;
                }
                let mut e = Vec::new();
                abi::encode_scan_entry(&mut e, &c.entries[c.pos].0, &c.entries[c.pos].1);
                let n = write_if_fits(out, &e);
                if e.len() <= out.len() {
                    c.pos += 1;
                }
                n
            },
            err,
        )
    }

    pub fn scan_close(cursor: u32) -> i32 {
        with(
            "scan_close",
            |f| match f.cursors.remove(&cursor) {
                Some(_) => 0,
                None => err(Errno::NOCURSOR),
            },
            err,
        )
    }

    pub fn commit_mark(key: &[u8]) -> i32 {
        with(
            "commit_mark",
            |f| {
                if f.phase != Some(Phase::Record) && f.phase != Some(Phase::Timer) {
                    return err(Errno::PHASE);
                }
                if key.len() > abi::MAX_TIMER_KEY_SIZE {
                    return err(Errno::TOOLARGE);
                }
                let ts = f.call_ts;
                if let Some(t) = f.marks.get_mut(key) {
                    *t = ts; // the last marking call's timestamp wins
                    return 0;
                }
                if f.marks.len() >= Fake::limit(f.max_marks, abi::DEFAULT_MAX_COMMIT_MARKS) {
                    return err(Errno::LIMIT);
                }
                f.marks.insert(key.to_vec(), ts);
                1
            },
            err,
        )
    }

    /// The checks of timer_set and timer_cancel, in the ABI's order.
    fn timer_args(f: &Fake, kind: u32, ts: i64, key: &[u8]) -> Option<i32> {
        if !f.in_call() || f.phase == Some(Phase::Migrate) {
            return Some(err(Errno::PHASE));
        }
        abi::check_timer(kind, ts, key.len()).map(err)
    }

    pub fn timer_set(kind: u32, ts: i64, key: &[u8]) -> i32 {
        with(
            "timer_set",
            |f| {
                if let Some(r) = timer_args(f, kind, ts, key) {
                    return r;
                }
                let id = (ts, kind, key.to_vec());
                if f.timers.contains(&id) {
                    return 0;
                }
                if f.timers.len() >= Fake::limit(f.max_timers, abi::DEFAULT_MAX_TIMERS) {
                    return err(Errno::LIMIT);
                }
                f.timers.insert(id);
                1
            },
            err,
        )
    }

    pub fn timer_cancel(kind: u32, ts: i64, key: &[u8]) -> i32 {
        with(
            "timer_cancel",
            |f| {
                if let Some(r) = timer_args(f, kind, ts, key) {
                    return r;
                }
                if f.timers.remove(&(ts, kind, key.to_vec())) {
                    1
                } else {
                    0
                }
            },
            err,
        )
    }

    pub fn time_now(clock: u32) -> i64 {
        with(
            "time_now",
            |f| {
                if !f.in_call() {
                    return -(Errno::PHASE.0 as i64);
                }
                let (stream, wall) = f.call_clocks.unwrap_or((f.stream_time, f.wall_time));
                match clock {
                    abi::CLOCK_STREAM => stream,
                    abi::CLOCK_WALL => wall,
                    _ => -(Errno::INVAL.0 as i64),
                }
            },
            |e| -(e.0 as i64),
        )
    }

    /// sys::address natively: a handle (1, 2, ...) for `p`, which the fake
    /// resolves when it reads a batch's slots (see `Host::batch_raw`).
    pub fn address(p: *const u8) -> u32 {
        ADDRESSES.with(|a| {
            let mut a = a.borrow_mut();
            a.push(p as usize);
            a.len() as u32
        })
    }
}
