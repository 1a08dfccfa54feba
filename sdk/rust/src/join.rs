//! Stream-stream joins of two inputs of one task by key within a time
//! window, as Kafka Streams' KStream#join, #leftJoin and #outerJoin with
//! JoinWindows do: inner, left and outer joins, a grace period for
//! out-of-order records, and late records counted and optionally sent to an
//! output of their own. It mirrors the Go SDK's package sdk/join: the same
//! semantics and the same keys and values in the store and in timers.
//!
//! Both streams are inputs of one processor, co-partitioned (the host gives
//! one task partition p of every input), so a key's records of both sides
//! meet in one task. `Spec::left` and `Spec::right` name the sides by their
//! input index (`Record::input`).
//!
//! ```text
//! static CLICKS: Join = Join::new(Spec {
//!     left: 0, right: 1,            // impressions, clicks
//!     after: 600_000, grace: 60_000, kind: Kind::Left,
//!     ..Spec::new("j", &STORE, emit_joined)
//! });
//! fn process(r: &Record) -> Result<()> { CLICKS.add(r) }
//! fn fired(f: &Firing) -> Result<()> { CLICKS.on_timer(f).map(|_| ()) }
//! ```
//!
//! **Semantics.** A left record at time t joins every right record of its
//! key with a timestamp in [t-before, t+after], whichever comes first: each
//! matching pair is emitted once, when the second of the two is processed,
//! with the larger of the two timestamps. A record is late when its
//! timestamp is more than `grace` behind the task's stream time: it is
//! counted (`late_count`), sent to the late output if there is one, and
//! joins nothing. A left join also emits every left record that found no
//! match, with no right side, once no match can come any more (the stream
//! time past t+after+grace); an outer join does the same for unmatched
//! right records (t+before+grace).
//!
//! **State.** Each record is buffered in the store until no record that is
//! not late could join it any more, then deleted by an event-time timer.
//! Keys start with the spec's name and a zero byte; timer keys are the
//! buffered records' keys. A record's buffer key is its key plus 22 bytes
//! and the name (at most `abi::MAX_KEY_SIZE`). The buffer keeps each
//! record's key, value and timestamp, not its headers.

use crate::layout::{self, from_sortable};
use crate::timer::{self, Firing};
use crate::{Error, Output, Record, Result, Store};

/// Which unmatched records a join emits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only matched pairs.
    Inner,
    /// Also every left record that found no match, once its window passed.
    Left,
    /// Also unmatched records of both sides.
    Outer,
}

/// Receives every joined (or unmatched) pair.
pub type ResultFn = fn(res: &JoinResult<'_>) -> Result<()>;

/// Describes a join.
#[derive(Clone, Copy)]
pub struct Spec {
    /// Prefixes every state and timer key of the join. Required; no zero
    /// byte; short.
    pub name: &'static str,
    /// Buffers both sides.
    pub store: &'static Store,
    /// The input indexes (`Record::input`) of the two sides; they differ. A
    /// record of any other input fails.
    pub left: u32,
    pub right: u32,
    /// Bound the window, in ms: a left record at t joins right records with
    /// timestamps in [t-before, t+after]. Not negative.
    pub before: i64,
    pub after: i64,
    /// How far behind the stream time a record may be and still join, in ms.
    pub grace: i64,
    pub kind: Kind,
    pub result: ResultFn,
    /// Receives every late record as it came, with the header `LATE_HEADER`
    /// added.
    pub late_output: Option<&'static Output>,
}

impl Spec {
    /// An inner join of inputs 0 (left) and 1 (right) with a zero window,
    /// no grace and no late output; meant for struct update syntax.
    pub const fn new(name: &'static str, store: &'static Store, result: ResultFn) -> Spec {
        Spec {
            name,
            store,
            left: 0,
            right: 1,
            before: 0,
            after: 0,
            grace: 0,
            kind: Kind::Inner,
            result,
            late_output: None,
        }
    }
}

/// Added to a late record sent to `Spec::late_output`; its value is the
/// spec's name.
pub const LATE_HEADER: &str = "wasmstream-join-late";

/// One record of a join result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Side<'a> {
    /// `None` for a null value.
    pub value: Option<&'a [u8]>,
    pub timestamp: i64,
}

/// One join result: a matched pair, or an unmatched record of a left or
/// outer join with the other side `None`.
#[derive(Clone, Copy, Debug)]
pub struct JoinResult<'a> {
    pub key: &'a [u8],
    pub left: Option<Side<'a>>,
    pub right: Option<Side<'a>>,
    /// The larger of the two sides' timestamps (the one side's for an
    /// unmatched record): the one to give the emitted record.
    pub timestamp: i64,
}

/// One stream-stream join. Declare it as a static (`Join::new` is const),
/// `check` it at init, call `add` for each record of either side and
/// `on_timer` from the timer function.
pub struct Join {
    s: Spec,
}

const TAG_LEFT: u8 = b'L';
const TAG_RIGHT: u8 = b'R';

/// Joined at least one record of the other side.
const FLAG_MATCHED: u8 = 1 << 0;
/// The record's value is null.
const FLAG_NULL: u8 = 1 << 1;

/// One buffered record of the other side that a new record matched.
struct Buffered {
    key: Vec<u8>,
    ts: i64,
    flags: u8,
    value: Vec<u8>,
}

impl Join {
    /// The join `spec` describes; `check` reports what is wrong with it.
    pub const fn new(spec: Spec) -> Join {
        Join { s: spec }
    }

    fn bad(&self, msg: &str) -> Error {
        Error::msg(format!("join: {:?}: {}", self.s.name, msg))
    }

    /// Checks the spec (the Go SDK's join.New): call it at init.
    pub fn check(&self) -> Result<()> {
        let s = &self.s;
        let msg = if s.name.is_empty() {
            "name is required"
        } else if s.name.as_bytes().contains(&0) {
            "name may not contain a zero byte"
        } else if s.left == s.right {
            "left and right must be different inputs"
        } else if s.before < 0 || s.after < 0 || s.grace < 0 {
            "before, after and grace must not be negative"
        } else {
            return Ok(());
        };
        Err(self.bad(msg))
    }

    fn emits_unmatched(&self, tag: u8) -> bool {
        self.s.kind == Kind::Outer || (self.s.kind == Kind::Left && tag == TAG_LEFT)
    }

    /// Joins a record of either side with the buffered records of the
    /// other, emits the pairs, and buffers the record until its window has
    /// passed. A late record (or one without a timestamp) is counted and
    /// sent to the late output and changes nothing else. A null key is the
    /// empty key.
    pub fn add(&self, r: &Record<'_>) -> Result<()> {
        self.check()?;
        let ts = r.timestamp();
        let (tag, other, lo, hi) = if r.input() == self.s.left {
            (TAG_LEFT, TAG_RIGHT, ts.saturating_sub(self.s.before), ts.saturating_add(self.s.after))
        } else if r.input() == self.s.right {
            (TAG_RIGHT, TAG_LEFT, ts.saturating_sub(self.s.after), ts.saturating_add(self.s.before))
        } else {
            return Err(self.bad(&format!(
                "a record of input {}, which is neither side (left {}, right {})",
                r.input(),
                self.s.left,
                self.s.right
            )));
        };
        if ts < 0 {
            return self.late_record(r);
        }
        let now = timer::stream_time()?;
        if now != timer::NO_TIME && ts < now.saturating_sub(self.s.grace) {
            return self.late_record(r);
        }
        let key = r.key().unwrap_or(b"");
        let matches = self.scan(other, key, lo.max(0), hi)?;
        let mut flags = if r.value().is_none() { FLAG_NULL } else { 0 };
        let this = Side { value: r.value(), timestamp: ts };
        for m in &matches {
            let that = Side { value: if m.flags & FLAG_NULL != 0 { None } else { Some(&m.value) }, timestamp: m.ts };
            let (left, right) = if tag == TAG_LEFT { (this, that) } else { (that, this) };
            (self.s.result)(&JoinResult { key, left: Some(left), right: Some(right), timestamp: ts.max(m.ts) })?;
            flags |= FLAG_MATCHED;
            // Remember that the buffered record matched, if its unmatched
            // result would otherwise be emitted when it expires.
            if m.flags & FLAG_MATCHED == 0 && self.emits_unmatched(other) {
                let mut v = vec![m.flags | FLAG_MATCHED];
                v.extend_from_slice(&m.value);
                self.s.store.put(&m.key, &v)?;
            }
        }
        let bkey = self.buffer_key(tag, key, ts, r.offset())?;
        let mut v = vec![flags];
        v.extend_from_slice(r.value().unwrap_or(b""));
        self.s.store.put(&bkey, &v)?;
        // Kept while a record that is not late could still join it: the
        // other side's timestamps it joins end at hi, and a record is not
        // late while its timestamp is >= stream time - grace.
        timer::set(timer::EVENT_TIME, hi.saturating_add(self.s.grace).saturating_add(1), &bkey)?;
        Ok(())
    }

    /// The buffered records of one side and key with timestamps in [lo,
    /// hi], in timestamp order.
    fn scan(&self, tag: u8, key: &[u8], lo: i64, hi: i64) -> Result<Vec<Buffered>> {
        if hi < lo {
            return Ok(Vec::new());
        }
        let start = self.buffer_key(tag, key, lo, 0)?;
        let end = if hi == i64::MAX {
            crate::prefix_end(&start[..start.len() - 16])
        } else {
            self.buffer_key(tag, key, hi + 1, 0)?
        };
        let mut it = self.s.store.scan(&start, &end)?;
        let mut out = Vec::new();
        while let Some((k, v)) = it.next()? {
            let ts = match self.parse_key(k) {
                Some((_, _, ts)) if !v.is_empty() => ts,
                _ => return Err(self.corrupt(k)),
            };
            out.push(Buffered { key: k.to_vec(), ts, flags: v[0], value: v[1..].to_vec() });
        }
        Ok(out)
    }

    /// Handles the join's timers: deletes the buffered record the timer is
    /// for, first emitting it unmatched if the kind of join says so.
    /// `Ok(false)`, doing nothing, for a timer that is not this join's.
    pub fn on_timer(&self, f: &Firing<'_>) -> Result<bool> {
        if f.kind() != timer::EVENT_TIME {
            return Ok(false);
        }
        let (tag, key, ts) = match self.parse_key(f.key()) {
            Some(p) => p,
            None => return Ok(false),
        };
        self.check()?;
        let v = match self.s.store.get(f.key())? {
            Some(v) => v,
            None => return Ok(true), // deleted already: nothing to do
        };
        if v.is_empty() {
            return Err(self.corrupt(f.key()));
        }
        if v[0] & FLAG_MATCHED == 0 && self.emits_unmatched(tag) {
            let side = Side { value: if v[0] & FLAG_NULL != 0 { None } else { Some(&v[1..]) }, timestamp: ts };
            let (left, right) = if tag == TAG_LEFT { (Some(side), None) } else { (None, Some(side)) };
            (self.s.result)(&JoinResult { key, left, right, timestamp: ts })?;
        }
        self.s.store.delete(f.key())?;
        Ok(true)
    }

    /// The number of late records this join has seen in this task (kept in
    /// the store, so it survives restarts and moves).
    pub fn late_count(&self) -> Result<u64> {
        layout::late_count(self.s.store, self.s.name, |k| self.corrupt(k))
    }

    fn late_record(&self, r: &Record<'_>) -> Result<()> {
        let n = self.late_count()?;
        layout::late_record(self.s.store, self.s.name, n, self.s.late_output, LATE_HEADER, r, r.key())
    }

    /// name, 0, side tag, u32 key length, key, timestamp (sortable), offset
    /// (sortable): one buffered record. The offset tells apart records of
    /// one key with one timestamp, and makes a record processed again after
    /// an abort land on the same key.
    fn buffer_key(&self, tag: u8, key: &[u8], ts: i64, offset: i64) -> Result<Vec<u8>> {
        let mut k = layout::record_key("join", self.s.name, tag, key, "buffer key", 16)?;
        k.extend_from_slice(&layout::sortable(ts));
        k.extend_from_slice(&layout::sortable(offset));
        Ok(k)
    }

    /// Splits a key made by buffer_key; `None` for any other key.
    fn parse_key<'a>(&self, k: &'a [u8]) -> Option<(u8, &'a [u8], i64)> {
        let (tag, key, tail) = layout::parse_key(self.s.name, k, [TAG_LEFT, TAG_RIGHT], 16)?;
        Some((tag, key, from_sortable(tail)))
    }

    fn corrupt(&self, key: &[u8]) -> Error {
        self.bad(&format!("corrupt buffered record under key {:?}", String::from_utf8_lossy(key)))
    }
}
