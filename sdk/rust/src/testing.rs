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
//! MAX_OPEN_CURSORS cursors (ELIMIT), and a failed record's emits and state
//! writes discarded as a whole. Commit marks are kept per window: `commit`
//! ends the window with one call of the commit function per marked key, in
//! key order (abi/ABI.md section 8.3).
//!
//! Each Host is a fresh instance on the calling thread; tests on different
//! threads (cargo test's default) do not share anything.

use crate::abi::{self, Errno};
use crate::{Commit, Record, Result};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};

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

/// The outcome of one record or commit call.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// What wasmstream_process returned.
    pub status: i32,
    /// `None` when the record succeeded; else the processor's set_error
    /// text, or why the host failed the record.
    pub error: Option<String>,
    /// The emitted records in emit order; empty when the record failed.
    pub emitted: Vec<Emitted>,
}

/// One line the processor logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Log {
    pub level: u32,
    pub msg: String,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle,
    Init,
    Record,
    Commit,
}

struct Cursor {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    pos: usize,
}

#[derive(Default)]
struct Fake {
    outputs: Vec<String>,
    stores: Vec<String>,
    data: Vec<BTreeMap<Vec<u8>, Vec<u8>>>,
    config: Vec<u8>,
    logs: Vec<Log>,
    phase: Option<Phase>,
    err_msg: Option<String>,
    host_fail: Option<String>,
    emitted: Vec<Emitted>,
    cursors: BTreeMap<u32, Cursor>,
    next_cursor: u32,
    fault: Option<fn(&str) -> Option<Errno>>,
    /// The keys marked in the window, with the timestamp of their last
    /// mark; staged holds the current record's until it succeeds.
    marks: BTreeMap<Vec<u8>, i64>,
    staged_marks: BTreeMap<Vec<u8>, i64>,
    /// limits.commit_marks; 0 until set means abi::DEFAULT_MAX_COMMIT_MARKS.
    max_marks: usize,
    /// The timestamp of the record being processed.
    cur_ts: i64,
    /// The largest record timestamp seen (>= 0), or abi::NO_TIME.
    stream_time: i64,
}

thread_local! {
    static ACTIVE: RefCell<Option<Rc<RefCell<Fake>>>> = RefCell::new(None);
}

static GENERATIONS: AtomicU32 = AtomicU32::new(1);

/// A fake host running one processor instance on this thread.
pub struct Host<F: Fn(&Record<'_>) -> Result<()>> {
    process: F,
    init: fn() -> Result<()>,
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
            on_commit: None,
            fake: Rc::new(RefCell::new(Fake { stream_time: abi::NO_TIME, ..Fake::default() })),
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

    /// Starts the instance: runs the init function, then asks for the
    /// input buffer (abi/ABI.md section 3). The error is init's set_error text.
    pub fn start(&mut self) -> core::result::Result<(), String> {
        self.activate();
        self.begin(Phase::Init);
        let st = crate::__rt::init(self.init);
        let (err, _) = self.end(st);
        if let Some(e) = err {
            return Err(e);
        }
        crate::__rt::input(4096);
        self.started = true;
        Ok(())
    }

    /// Processes one record (starting the instance first if needed; a
    /// failing init panics).
    pub fn process(&mut self, rec: &Input) -> Outcome {
        if !self.started {
            if let Err(e) = self.start() {
                panic!("wasmstream::testing: init failed: {}", e);
            }
        }
        self.activate();
        let enc = rec.encode();
        let ptr = crate::__rt::input(enc.len() as u32);
        assert!(!ptr.is_null(), "wasmstream::testing: the SDK refused a {}-byte input buffer", enc.len());
        unsafe { core::ptr::copy_nonoverlapping(enc.as_ptr(), ptr, enc.len()) };
        let saved = self.fake.borrow().data.clone();
        self.begin(Phase::Record);
        {
            let mut f = self.fake.borrow_mut();
            f.cur_ts = rec.timestamp;
            if rec.timestamp >= 0 && rec.timestamp > f.stream_time {
                f.stream_time = rec.timestamp;
            }
        }
        let st = crate::__rt::process(enc.len() as u32, &self.process);
        let (error, emitted) = self.end(st);
        let mut f = self.fake.borrow_mut();
        let staged = std::mem::take(&mut f.staged_marks);
        if error.is_some() {
            f.data = saved; // staged writes discarded
        } else {
            f.marks.extend(staged);
        }
        Outcome { status: st, error, emitted }
    }

    /// Ends the commit window: one call of the commit function per key
    /// marked in it, in key order, each with its own outcome (a failed
    /// call's emits and state writes are discarded); the marks are then
    /// cleared. Panics if keys are marked and no commit function was set.
    pub fn commit(&mut self) -> Vec<(Vec<u8>, Outcome)> {
        self.activate();
        let marks = std::mem::take(&mut self.fake.borrow_mut().marks);
        let mut out = Vec::new();
        for (key, ts) in marks {
            let f = self.on_commit.expect("wasmstream::testing: keys were marked but the Host has no on_commit");
            let mut enc = Vec::new();
            let stream_time = self.fake.borrow().stream_time;
            abi::encode_trigger(
                &mut enc,
                &abi::Trigger { timestamp: ts, stream_time, wall_time: 0, kind: abi::TRIGGER_COMMIT, key: &key },
            );
            let ptr = crate::__rt::input(enc.len() as u32);
            unsafe { core::ptr::copy_nonoverlapping(enc.as_ptr(), ptr, enc.len()) };
            let saved = self.fake.borrow().data.clone();
            self.begin(Phase::Commit);
            let st = crate::__rt::on_commit(enc.len() as u32, f);
            let (error, emitted) = self.end(st);
            if error.is_some() {
                self.fake.borrow_mut().data = saved;
            }
            out.push((key, Outcome { status: st, error, emitted }));
        }
        out
    }

    /// Processes the raw bytes `raw` as a record (for malformed input).
    pub fn process_raw(&mut self, raw: &[u8]) -> Outcome {
        if !self.started {
            self.start().expect("wasmstream::testing: init failed");
        }
        self.activate();
        let ptr = crate::__rt::input(raw.len() as u32);
        unsafe { core::ptr::copy_nonoverlapping(raw.as_ptr(), ptr, raw.len()) };
        self.begin(Phase::Record);
        let st = crate::__rt::process(raw.len() as u32, &self.process);
        let (error, emitted) = self.end(st);
        Outcome { status: st, error, emitted }
    }

    fn begin(&self, p: Phase) {
        let mut f = self.fake.borrow_mut();
        f.phase = Some(p);
        f.err_msg = None;
        f.host_fail = None;
        f.emitted.clear();
        f.cursors.clear();
    }

    fn end(&self, status: i32) -> (Option<String>, Vec<Emitted>) {
        let mut f = self.fake.borrow_mut();
        f.phase = Some(Phase::Idle);
        f.cursors.clear();
        let emitted = std::mem::take(&mut f.emitted);
        let err = if let Some(h) = f.host_fail.take() {
            Some(h)
        } else if status == abi::STATUS_OK {
            None
        } else if status == abi::STATUS_FAILED {
            Some(f.err_msg.take().unwrap_or_else(|| "failed without set_error".to_string()))
        } else {
            Some(format!("ABI misuse: unknown status {}", status))
        };
        if err.is_some() {
            return (err, Vec::new());
        }
        (None, emitted)
    }

    /// The committed value of `key` in `store`.
    pub fn get(&self, store: &str, key: &[u8]) -> Option<Vec<u8>> {
        let f = self.fake.borrow();
        let i = f.stores.iter().position(|s| s == store).expect("wasmstream::testing: undeclared store");
        f.data[i].get(key).cloned()
    }

    /// Sets a committed value, as if an earlier record had written it.
    pub fn put(&self, store: &str, key: &[u8], value: &[u8]) {
        let mut f = self.fake.borrow_mut();
        let i = f.stores.iter().position(|s| s == store).expect("wasmstream::testing: undeclared store");
        f.data[i].insert(key.to_vec(), value.to_vec());
    }

    /// Every committed entry of `store`, in key order.
    pub fn entries(&self, store: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
        let f = self.fake.borrow();
        let i = f.stores.iter().position(|s| s == store).expect("wasmstream::testing: undeclared store");
        f.data[i].iter().map(|(k, v)| (k.clone(), v.clone())).collect()
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

    /// Emits and state calls: in a record or a commit call.
    fn in_record(f: &Fake) -> Option<i32> {
        if f.phase != Some(Phase::Record) && f.phase != Some(Phase::Commit) {
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
                if rec.len() > abi::MAX_RECORD_SIZE {
                    return err(Errno::TOOLARGE);
                }
                let d = match abi::decode(rec) {
                    Some(d) => d,
                    None => return err(Errno::INVAL),
                };
                if d.index as usize >= f.outputs.len() {
                    f.host_fail = Some(format!("emit to undeclared output index {}", d.index));
                    return err(Errno::NOOUTPUT);
                }
                let e = Emitted {
                    output: f.outputs[d.index as usize].clone(),
                    key: d.key.map(|k| k.to_vec()),
                    value: d.value.map(|v| v.to_vec()),
                    headers: d.headers().map(|h| (h.name.to_vec(), h.value.map(|v| v.to_vec()))).collect(),
                    timestamp: d.timestamp,
                    partition: d.partition,
                    raw: rec.to_vec(),
                };
                f.emitted.push(e);
                0
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
                if level > abi_log_error() {
                    return err(Errno::INVAL);
                }
                let m = &msg[..msg.len().min(abi::MAX_LOG_SIZE)];
                f.logs.push(Log { level, msg: String::from_utf8_lossy(m).into_owned() });
                0
            },
            err,
        )
    }

    fn abi_log_error() -> u32 {
        3
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
                match f.data[st as usize].get(key) {
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
                f.data[st as usize].insert(key.to_vec(), value.to_vec());
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
                let entries = f.data[st as usize]
                    .iter()
                    .filter(|(k, _)| k.as_slice() >= start && (end.is_empty() || k.as_slice() < end))
                    .map(|(k, v)| (k.clone(), v.clone()))
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
                if f.phase != Some(Phase::Record) {
                    return err(Errno::PHASE);
                }
                if key.len() > abi::MAX_TIMER_KEY_SIZE {
                    return err(Errno::TOOLARGE);
                }
                let ts = f.cur_ts;
                if let Some(t) = f.staged_marks.get_mut(key) {
                    *t = ts;
                    return 0;
                }
                let known = f.marks.contains_key(key);
                let max = if f.max_marks == 0 { abi::DEFAULT_MAX_COMMIT_MARKS } else { f.max_marks };
                if !known && f.marks.len() + f.staged_marks.len() >= max {
                    return err(Errno::LIMIT);
                }
                f.staged_marks.insert(key.to_vec(), ts);
                if known {
                    0
                } else {
                    1
                }
            },
            err,
        )
    }
}
