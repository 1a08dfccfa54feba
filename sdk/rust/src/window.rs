//! Windowed aggregation per key, as Kafka Streams' windowed aggregations
//! do: tumbling, hopping and session windows, a grace period for
//! out-of-order records, results emitted on every update, once per commit
//! window or once when the window closes, and late records counted and
//! optionally sent to an output of their own. It mirrors the Go SDK's
//! package sdk/window: the same semantics, and the same keys and values in
//! the store and in timers, so a processor keeps its windows when it is
//! rewritten from one SDK to another.
//!
//! ```text
//! use wasmstream::window::{self, Emit, Spec, WindowResult, Windows};
//!
//! static STORE: Store = wasmstream::store!("windows");
//! static COUNTS: Windows = Windows::new(Spec {
//!     size: 60_000,
//!     grace: 5_000,
//!     emit: Emit::Final,
//!     ..Spec::new("c", &STORE, window::count, emit_count)
//! });
//!
//! fn init() -> Result<()> { COUNTS.check() }
//! fn process(r: &Record) -> Result<()> { COUNTS.add(r) }
//! fn fired(f: &Firing) -> Result<()> { COUNTS.on_timer(f).map(|_| ()) }
//!
//! wasmstream::processor!(process, init, handles = [STORE, OUT], on_timer = fired);
//! ```
//!
//! **Time.** All times are ms since the Unix epoch, and windows follow event
//! time: a record belongs to the windows of its timestamp, and a window
//! closes when the task's stream time reaches its end plus the grace
//! period. A window [start, end) accepts records while the stream time is
//! below end + grace; a record that comes later for it is late. The close
//! is an event-time timer, so a window of a quiet partition closes when
//! records of any key move the stream time on.
//!
//! **State.** Everything lives in the spec's store under keys that start
//! with its name and a zero byte, so several `Windows` (and the processor's
//! own keys) can share a store; timer and commit-mark keys start the same
//! way, which is how `on_timer` and `on_commit` recognize theirs. A closed
//! window's state is deleted. A window's key is the record key, the name
//! and 14 bytes, at most `abi::MAX_KEY_SIZE`: a record with a longer key
//! fails.

use crate::layout::{self, be64, from_sortable};
use crate::timer::{self, Firing};
use crate::{Commit, Errno, Error, Output, Record, Result, Store};

/// When a window's result is emitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Emit {
    /// Once, when the window closes (stream time past its end plus the
    /// grace period), with its final aggregate: Kafka Streams'
    /// suppress(untilWindowCloses). Nothing is emitted before.
    Final,
    /// After every record that changes the window. Nothing more when it
    /// closes.
    Update,
    /// The latest aggregate of each window that changed, once per commit
    /// window (`commit_mark`), and at its close if it changed since: the
    /// effect of Kafka Streams' record cache. When the host's commit-mark
    /// limit is reached the update is emitted at once instead.
    OnCommit,
}

/// Folds a record into a window's aggregate; `acc` is `None` for a new
/// window.
pub type Aggregate = fn(acc: Option<&[u8]>, r: &Record<'_>) -> Result<Vec<u8>>;
/// Combines the aggregates of two sessions that a record joins, the earlier
/// first.
pub type Merge = fn(a: &[u8], b: &[u8]) -> Result<Vec<u8>>;
/// Receives every result to emit.
pub type ResultFn = fn(res: &WindowResult<'_>) -> Result<()>;

/// Describes a set of windows. Exactly one of `size` (tumbling or hopping
/// windows) and `gap` (session windows) is set.
#[derive(Clone, Copy)]
pub struct Spec {
    /// Prefixes every state, timer and commit-mark key of these windows.
    /// Required; no zero byte; short (it is in every key).
    pub name: &'static str,
    /// Holds the windows' state.
    pub store: &'static Store,
    /// The length of a tumbling or hopping window, in ms.
    pub size: i64,
    /// How far apart hopping windows start, in ms: 0 < advance <= size. 0
    /// means size: tumbling windows. Windows start at multiples of advance
    /// since the epoch.
    pub advance: i64,
    /// Makes session windows: a key's records at most `gap` ms apart belong
    /// to one session, which grows and merges as records come.
    pub gap: i64,
    /// How long after a window's end it still accepts records, in ms of
    /// stream time.
    pub grace: i64,
    /// When results are emitted.
    pub emit: Emit,
    pub aggregate: Aggregate,
    /// Required for session windows.
    pub merge: Option<Merge>,
    pub result: ResultFn,
    /// Receives every late record as it came (key, value, headers,
    /// timestamp) with the header `LATE_HEADER` added.
    pub late_output: Option<&'static Output>,
}

impl Spec {
    /// A spec with the required parts and everything else zero: no window
    /// yet (set `size` or `gap`), no grace, `Emit::Final`, no merge, no late
    /// output. Meant for struct update syntax, `Spec { size: 10, ..Spec::new(..) }`.
    pub const fn new(name: &'static str, store: &'static Store, aggregate: Aggregate, result: ResultFn) -> Spec {
        Spec {
            name,
            store,
            size: 0,
            advance: 0,
            gap: 0,
            grace: 0,
            emit: Emit::Final,
            aggregate,
            merge: None,
            result,
            late_output: None,
        }
    }
}

/// Added to a late record sent to `Spec::late_output`; its value is the
/// spec's name.
pub const LATE_HEADER: &str = "wasmstream-window-late";

/// The span [start, end) of a window, in ms. A session's start is its first
/// record's timestamp and its end one past its last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub start: i64,
    pub end: i64,
}

/// One window result.
#[derive(Clone, Copy, Debug)]
pub struct WindowResult<'a> {
    /// The record key the window belongs to (a null key is the empty key).
    pub key: &'a [u8],
    pub window: Window,
    /// The aggregate; `None` retracts a session that a record merged into
    /// another (`Emit::Update` and `Emit::OnCommit`, once it was emitted).
    pub agg: Option<&'a [u8]>,
    /// The largest record timestamp in the window: the one to give the
    /// emitted record.
    pub timestamp: i64,
    /// The window has closed: no other result for it follows.
    pub is_final: bool,
}

/// A set of windows per key. Declare it as a static (`Windows::new` is
/// const), `check` it at init, call `add` for each record and `on_timer`
/// and `on_commit` from the processor's callbacks.
pub struct Windows {
    s: Spec,
}

const TAG_WINDOW: u8 = b'w';
const TAG_SESSION: u8 = b's';

/// Changed since its result was last emitted (Emit::OnCommit).
const FLAG_DIRTY: u8 = 1 << 0;
/// A result was emitted (Emit::OnCommit; for retractions).
const FLAG_EMITTED: u8 = 1 << 1;

/// A window's value: flags u8, end i64, largest timestamp i64 (big-endian),
/// then the aggregate.
struct Stored {
    flags: u8,
    end: i64,
    max_ts: i64,
    agg: Option<Vec<u8>>,
}

const STORED_HEADER: usize = 17;

impl Windows {
    /// The windows `spec` describes; `check` reports what is wrong with it.
    pub const fn new(spec: Spec) -> Windows {
        Windows { s: spec }
    }

    fn bad(&self, msg: &str) -> Error {
        Error::msg(format!("window: {:?}: {}", self.s.name, msg))
    }

    /// Checks the spec (the Go SDK's window.New): call it at init so a bad
    /// spec fails the start. `add` and the callbacks check it too.
    pub fn check(&self) -> Result<()> {
        let s = &self.s;
        let msg = if s.name.is_empty() {
            "name is required"
        } else if s.name.as_bytes().contains(&0) {
            "name may not contain a zero byte"
        } else if s.grace < 0 {
            "grace must not be negative"
        } else if (s.size > 0) == (s.gap > 0) {
            "set exactly one of size (tumbling, hopping) and gap (sessions), positive"
        } else if s.size < 0 || s.gap < 0 {
            "size and gap must not be negative"
        } else if s.gap > 0 && s.advance != 0 {
            "advance is for hopping windows, not sessions"
        } else if s.gap > 0 && s.merge.is_none() {
            "merge is required for session windows"
        } else if s.advance < 0 || s.advance > s.size {
            "advance must be in (0, size]"
        } else {
            return Ok(());
        };
        Err(self.bad(msg))
    }

    fn advance(&self) -> i64 {
        if self.s.advance == 0 {
            self.s.size
        } else {
            self.s.advance
        }
    }

    /// Adds a record to its key's windows and emits what the mode says. A
    /// record whose windows have all closed is late: it is counted
    /// (`late_count`) and sent to the late output if there is one, and
    /// changes nothing else. A record without a timestamp (negative) has no
    /// window and is late too. A null key is the empty key.
    pub fn add(&self, r: &Record<'_>) -> Result<()> {
        self.check()?;
        if r.timestamp() < 0 {
            return self.late_record(r, r.key());
        }
        let key = r.key().unwrap_or(b"");
        let now = timer::stream_time()?;
        if self.s.gap > 0 {
            return self.add_session(r, key, now);
        }
        let (ts, size, adv) = (r.timestamp(), self.s.size, self.advance());
        let mut applied = false;
        // The windows of ts start at multiples of adv in (ts-size, ts], and
        // not before 0, as Kafka Streams' TimeWindows.windowsFor.
        let mut start = ts.wrapping_sub(size).wrapping_add(adv).max(0) / adv * adv;
        while start <= ts {
            let end = start.wrapping_add(size);
            if end.wrapping_add(self.s.grace) > now {
                applied = true;
                self.add_to_window(r, key, start, end)?;
            }
            start = match start.checked_add(adv) {
                Some(s) => s,
                None => break,
            };
        }
        if !applied {
            return self.late_record(r, Some(key));
        }
        Ok(())
    }

    fn add_to_window(&self, r: &Record<'_>, key: &[u8], start: i64, end: i64) -> Result<()> {
        let skey = self.state_key(TAG_WINDOW, key, start)?;
        let mut st = match self.s.store.get(&skey)? {
            Some(v) => {
                let mut st = self.decode(&skey, &v)?;
                st.max_ts = st.max_ts.max(r.timestamp());
                st
            }
            None => {
                timer::set(timer::EVENT_TIME, end.wrapping_add(self.s.grace), &skey)?;
                Stored { flags: 0, end, max_ts: r.timestamp(), agg: None }
            }
        };
        st.agg = Some((self.s.aggregate)(st.agg.as_deref(), r)?);
        self.updated(&skey, key, start, st)
    }

    /// Stores a window that a record changed and emits per the mode.
    fn updated(&self, skey: &[u8], key: &[u8], start: i64, mut st: Stored) -> Result<()> {
        let emit = |st: &Stored| {
            (self.s.result)(&WindowResult {
                key,
                window: Window { start, end: st.end },
                agg: st.agg.as_deref(),
                timestamp: st.max_ts,
                is_final: false,
            })
        };
        match self.s.emit {
            Emit::Final => {}
            Emit::Update => emit(&st)?,
            Emit::OnCommit => {
                st.flags |= FLAG_DIRTY;
                match timer::mark(skey) {
                    Err(e) if e.errno() == Some(Errno::LIMIT) => {
                        // Too many keys marked in this window: emit now instead.
                        emit(&st)?;
                        st.flags = st.flags & !FLAG_DIRTY | FLAG_EMITTED;
                    }
                    Err(e) => return Err(e),
                    Ok(_) => {}
                }
            }
        }
        self.put(skey, &st)
    }

    /// Adds r to its key's sessions: it joins every session it is within
    /// gap of, merging them.
    fn add_session(&self, r: &Record<'_>, key: &[u8], now: i64) -> Result<()> {
        let (ts, gap, grace) = (r.timestamp(), self.s.gap, self.s.grace);
        let mut prefix = self.state_key(TAG_SESSION, key, 0)?;
        prefix.truncate(prefix.len() - 8);
        struct Old {
            key: Vec<u8>,
            start: i64,
            st: Stored,
        }
        let mut joined: Vec<Old> = Vec::new();
        {
            let mut it = self.s.store.scan_prefix(&prefix)?;
            while let Some((k, v)) = it.next()? {
                let start = from_sortable(&k[prefix.len()..]);
                let mut st = self.decode(k, v)?;
                // The session [start, end) takes records in [start-gap, end-1+gap].
                if ts >= start.wrapping_sub(gap) && ts <= st.end.wrapping_sub(1).wrapping_add(gap) {
                    if st.agg.as_ref().map_or(false, |a| a.is_empty()) {
                        st.agg = None;
                    }
                    joined.push(Old { key: k.to_vec(), start, st });
                }
            }
        }
        let (mut start, mut end, mut max_ts) = (ts, ts.wrapping_add(1), ts);
        for o in &joined {
            start = start.min(o.start);
            end = end.max(o.st.end);
            max_ts = max_ts.max(o.st.max_ts);
        }
        if end.wrapping_add(gap).wrapping_add(grace) <= now {
            return self.late_record(r, Some(key)); // even merged, the session is closed
        }
        let mut agg: Option<Vec<u8>> = None;
        let mut flags = 0u8;
        let merge = self.s.merge.expect("checked");
        for (i, o) in joined.iter().enumerate() {
            if i == 0 {
                agg = o.st.agg.clone();
            } else {
                agg = Some(merge(agg.as_deref().unwrap_or(&[]), o.st.agg.as_deref().unwrap_or(&[]))?);
            }
            if o.start == start {
                flags = o.st.flags & FLAG_EMITTED; // the same key keeps its history
            }
        }
        let agg = (self.s.aggregate)(agg.as_deref(), r)?;
        let skey = self.state_key(TAG_SESSION, key, start)?;
        for o in &joined {
            timer::cancel(timer::EVENT_TIME, o.st.end.wrapping_add(gap).wrapping_add(grace), &o.key)?;
            if o.start == start {
                continue; // the same key: overwritten below
            }
            self.s.store.delete(&o.key)?;
            if self.s.emit == Emit::Update || (self.s.emit == Emit::OnCommit && o.st.flags & FLAG_EMITTED != 0) {
                (self.s.result)(&WindowResult {
                    key,
                    window: Window { start: o.start, end: o.st.end },
                    agg: None,
                    timestamp: o.st.max_ts,
                    is_final: false,
                })?;
            }
        }
        timer::set(timer::EVENT_TIME, end.wrapping_add(gap).wrapping_add(grace), &skey)?;
        self.updated(&skey, key, start, Stored { flags, end, max_ts, agg: Some(agg) })
    }

    /// Handles the timers of these windows: closes the window the timer is
    /// for, emitting its final result per the mode, and deletes its state.
    /// `Ok(false)`, doing nothing, for a timer that is not one of these
    /// windows' (another `Windows`', or the processor's own).
    pub fn on_timer(&self, f: &Firing<'_>) -> Result<bool> {
        let (tag, key, start) = match self.parse_key(f.key()) {
            Some(p) if f.kind() == timer::EVENT_TIME => p,
            _ => return Ok(false),
        };
        self.check()?;
        let v = match self.s.store.get(f.key())? {
            Some(v) => v,
            None => return Ok(true), // nothing left to close
        };
        let st = self.decode(f.key(), &v)?;
        let mut close_at = st.end.wrapping_add(self.s.grace);
        if tag == TAG_SESSION {
            close_at = close_at.wrapping_add(self.s.gap);
        }
        if close_at != f.time() {
            return Ok(true); // a timer of an earlier extent of the session
        }
        if self.s.emit == Emit::Final || (self.s.emit == Emit::OnCommit && st.flags & FLAG_DIRTY != 0) {
            (self.s.result)(&WindowResult {
                key,
                window: Window { start, end: st.end },
                agg: st.agg.as_deref(),
                timestamp: st.max_ts,
                is_final: true,
            })?;
        }
        self.s.store.delete(f.key())?;
        Ok(true)
    }

    /// Handles the commit marks of these windows (`Emit::OnCommit`): emits
    /// the latest aggregate of a window that changed in the commit window.
    /// `Ok(false)` for a key that is not one of these windows'.
    pub fn on_commit(&self, c: &Commit<'_>) -> Result<bool> {
        let (_, key, start) = match self.parse_key(c.key()) {
            Some(p) => p,
            None => return Ok(false),
        };
        self.check()?;
        let v = match self.s.store.get(c.key())? {
            Some(v) => v,
            None => return Ok(true), // closed (and emitted) or merged away since
        };
        let mut st = self.decode(c.key(), &v)?;
        if st.flags & FLAG_DIRTY == 0 {
            return Ok(true);
        }
        (self.s.result)(&WindowResult {
            key,
            window: Window { start, end: st.end },
            agg: st.agg.as_deref(),
            timestamp: st.max_ts,
            is_final: false,
        })?;
        st.flags = st.flags & !FLAG_DIRTY | FLAG_EMITTED;
        self.put(c.key(), &st)?;
        Ok(true)
    }

    /// The number of late records these windows have seen in this task
    /// (kept in the store, so it survives restarts and moves).
    pub fn late_count(&self) -> Result<u64> {
        layout::late_count(self.s.store, self.s.name, |k| self.corrupt(k, "late count is not 8 bytes"))
    }

    fn late_record(&self, r: &Record<'_>, key: Option<&[u8]>) -> Result<()> {
        let n = self.late_count()?;
        layout::late_record(self.s.store, self.s.name, n, self.s.late_output, LATE_HEADER, r, key)
    }

    /// name, 0, tag, u32 key length, key, start (sortable): the state key
    /// of a window, and its timer and commit-mark key.
    fn state_key(&self, tag: u8, key: &[u8], start: i64) -> Result<Vec<u8>> {
        let mut k = layout::record_key("window", self.s.name, tag, key, "window key", 8)?;
        k.extend_from_slice(&layout::sortable(start));
        Ok(k)
    }

    /// Splits a key made by state_key; `None` for any other key.
    fn parse_key<'a>(&self, k: &'a [u8]) -> Option<(u8, &'a [u8], i64)> {
        let (tag, key, tail) = layout::parse_key(self.s.name, k, [TAG_WINDOW, TAG_SESSION], 8)?;
        Some((tag, key, from_sortable(tail)))
    }

    fn decode(&self, key: &[u8], v: &[u8]) -> Result<Stored> {
        if v.len() < STORED_HEADER {
            return Err(self.corrupt(key, &format!("window value of {} bytes", v.len())));
        }
        Ok(Stored {
            flags: v[0],
            end: be64(&v[1..]) as i64,
            max_ts: be64(&v[9..]) as i64,
            agg: Some(v[STORED_HEADER..].to_vec()),
        })
    }

    fn put(&self, key: &[u8], st: &Stored) -> Result<()> {
        let agg = st.agg.as_deref().unwrap_or(&[]);
        let mut v = Vec::with_capacity(STORED_HEADER + agg.len());
        v.push(st.flags);
        v.extend_from_slice(&st.end.to_be_bytes());
        v.extend_from_slice(&st.max_ts.to_be_bytes());
        v.extend_from_slice(agg);
        self.s.store.put(key, &v)
    }

    fn corrupt(&self, key: &[u8], what: &str) -> Error {
        Error::msg(format!(
            "window: {:?}: store {:?} key {:?}: {}",
            self.s.name,
            self.s.store.name(),
            String::from_utf8_lossy(key),
            what
        ))
    }
}

/// An `Aggregate` that counts records: the aggregate is an 8-byte
/// big-endian count.
pub fn count(acc: Option<&[u8]>, _r: &Record<'_>) -> Result<Vec<u8>> {
    Ok((count_of(acc)? + 1).to_be_bytes().to_vec())
}

/// The `Merge` of `count`: the sum (an empty aggregate counts 0).
pub fn merge_counts(a: &[u8], b: &[u8]) -> Result<Vec<u8>> {
    let x = if a.is_empty() { 0 } else { count_of(Some(a))? };
    let y = if b.is_empty() { 0 } else { count_of(Some(b))? };
    Ok((x + y).to_be_bytes().to_vec())
}

/// Decodes a `count` aggregate; `None` is 0.
pub fn count_of(agg: Option<&[u8]>) -> Result<u64> {
    match agg {
        None => Ok(0),
        Some(a) if a.len() == 8 => Ok(be64(a)),
        Some(a) => Err(Error::msg(format!("window: a count aggregate of {} bytes, want 8", a.len()))),
    }
}
