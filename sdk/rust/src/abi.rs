//! The ABI's constants, errno table and layouts (abi/ABI.md): records,
//! triggers (section 8) and batches (section 10). This module mirrors the
//! Go package `abi`; the shared vectors in abi/testdata (records.json,
//! triggers.json, batches.json) check both (tests/vectors.rs here).

/// The first ABI version; a plugin exports `wasmstream_abi_version_1` (the
/// `processor!` macro does), so that it runs on every host.
pub const VERSION: u32 = 1;
/// The ABI version that adds batches (section 10); the `processor!` macro
/// exports `wasmstream_abi_version_2` and `wasmstream_batch` too.
pub const VERSION_BATCH: u32 = 2;

/// Size of the fixed part of the record layout, in bytes.
pub const HEADER_SIZE: usize = 36;
/// Size of a scan entry's fixed part (u32 key length, u32 value length).
pub const SCAN_ENTRY_HEADER_SIZE: usize = 8;
/// The offset field of an emitted record.
pub const NO_OFFSET: i64 = -1;
/// The partition of an emitted record that lets the host choose by key hash.
pub const ANY_PARTITION: i32 = -1;

/// Largest state key, in bytes.
pub const MAX_KEY_SIZE: usize = 4 << 10;
/// Largest state value, in bytes.
pub const MAX_VALUE_SIZE: usize = 1 << 20;
/// Largest encoded record the host accepts from emit, in bytes.
pub const MAX_RECORD_SIZE: usize = 1 << 20;
/// Largest header count of one record.
pub const MAX_HEADERS: usize = 1024;
/// Largest log or error message the host keeps, in bytes.
pub const MAX_LOG_SIZE: usize = 4 << 10;
/// Scan cursors one record may hold open.
pub const MAX_OPEN_CURSORS: usize = 16;

/// Status returned by `wasmstream_process` and `wasmstream_init`.
pub const STATUS_OK: i32 = 0;
/// The plugin rejects the record; the reason was given with `set_error`.
pub const STATUS_FAILED: i32 = 1;

/// A host function's error: host functions return `-errno`. The numbers are
/// part of the contract and never change meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Errno(pub i32);

impl Errno {
    /// A pointer or length outside plugin memory (also fails the record).
    pub const FAULT: Errno = Errno(1);
    /// A malformed argument (bad record layout, unknown log level).
    pub const INVAL: Errno = Errno(2);
    /// An output index the processor does not declare (fails the record).
    pub const NOOUTPUT: Errno = Errno(3);
    /// A store index the processor does not declare.
    pub const NOSTORE: Errno = Errno(4);
    /// The key has no value.
    pub const NOTFOUND: Errno = Errno(5);
    /// A key, value or record over its limit.
    pub const TOOLARGE: Errno = Errno(6);
    /// No such scan cursor.
    pub const NOCURSOR: Errno = Errno(7);
    /// The call is not allowed now (emit or state during init).
    pub const PHASE: Errno = Errno(8);
    /// A per-record limit was reached (open cursors).
    pub const LIMIT: Errno = Errno(9);
    /// The host could not serve the call; the record fails.
    pub const IO: Errno = Errno(10);
    /// No declared output or store has that name.
    pub const NONAME: Errno = Errno(11);
    /// An emitted record's timestamp is outside what its output accepts; the record fails.
    pub const TIMESTAMP: Errno = Errno(12);

    /// The errno of a negative host result, `None` for a result >= 0.
    pub fn of(result: i32) -> Option<Errno> {
        if result < 0 {
            Some(Errno(result.wrapping_neg()))
        } else {
            None
        }
    }

    /// The symbolic name, such as "ENOTFOUND"; "E<n>" for an unknown one.
    pub fn name(self) -> &'static str {
        match self.0 {
            1 => "EFAULT",
            2 => "EINVAL",
            3 => "ENOOUTPUT",
            4 => "ENOSTORE",
            5 => "ENOTFOUND",
            6 => "ETOOLARGE",
            7 => "ENOCURSOR",
            8 => "EPHASE",
            9 => "ELIMIT",
            10 => "EIO",
            11 => "ENONAME",
            12 => "ETIMESTAMP",
            _ => "E?",
        }
    }

    /// The errno's text, as the Go package abi words it.
    pub fn text(self) -> &'static str {
        match self.0 {
            1 => "pointer or length outside plugin memory",
            2 => "malformed argument",
            3 => "output not declared by the processor",
            4 => "store not declared by the processor",
            5 => "key not found",
            6 => "over the size limit",
            7 => "no such scan cursor",
            8 => "call not allowed in this phase",
            9 => "per-record limit reached",
            10 => "host I/O failure",
            11 => "no output or store with that name",
            12 => "timestamp outside what the output accepts",
            _ => "unknown errno",
        }
    }
}

impl core::fmt::Display for Errno {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.name() == "E?" {
            write!(f, "errno {}", self.0)
        } else {
            write!(f, "{}: {}", self.name(), self.text())
        }
    }
}

/// One header of a record; `value: None` is a null header value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header<'a> {
    /// The header's name (UTF-8 by convention; not checked).
    pub name: &'a [u8],
    /// The header's value; `None` is null, `Some(b"")` is empty.
    pub value: Option<&'a [u8]>,
}

/// A decoded record: every slice borrows the bytes it was decoded from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fields<'a> {
    pub timestamp: i64,
    pub offset: i64,
    pub partition: i32,
    pub index: u32,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    /// The encoded headers (count given by `header_count`), checked well formed.
    pub headers: &'a [u8],
    pub header_count: u32,
}

impl<'a> Fields<'a> {
    /// The record's headers in order.
    pub fn headers(&self) -> Headers<'a> {
        Headers::new(self.headers, self.header_count)
    }
}

#[inline(always)]
fn u32_at(b: &[u8], p: usize) -> u32 {
    u32::from_le_bytes([b[p], b[p + 1], b[p + 2], b[p + 3]])
}

#[inline(always)]
fn u64_at(b: &[u8], p: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[p..p + 8]);
    u64::from_le_bytes(a)
}

/// The field of length `n` (-1 = null) at `src[p..]`, and the position after it.
#[inline(always)]
fn take(src: &[u8], p: usize, n: i32) -> Option<(Option<&[u8]>, usize)> {
    if n == -1 {
        return Some((None, p));
    }
    if n < 0 || n as usize > src.len() - p {
        return None;
    }
    let end = p + n as usize;
    Some((Some(&src[p..end]), end))
}

/// Decodes one record layout; `None` if the bytes are malformed (the same
/// rules as the Go codec: lengths must add up exactly, at most MAX_HEADERS
/// headers, no negative length but -1).
pub fn decode(src: &[u8]) -> Option<Fields<'_>> {
    if src.len() < HEADER_SIZE {
        return None;
    }
    decode_split(&src[..HEADER_SIZE], &src[HEADER_SIZE..])
}

/// Decodes a record given as its fixed part (HEADER_SIZE bytes) and the
/// bytes after it, so that the returned slices borrow only `body` (the SDK
/// rewrites the fixed part of its input buffer in place when it forwards a
/// record).
#[inline]
pub fn decode_split<'a>(fixed: &[u8], body: &'a [u8]) -> Option<Fields<'a>> {
    let fixed = &fixed[..HEADER_SIZE];
    let count = u32_at(fixed, 32);
    if count as usize > MAX_HEADERS {
        return None;
    }
    let (key, p) = take(body, 0, u32_at(fixed, 24) as i32)?;
    let (value, p) = take(body, p, u32_at(fixed, 28) as i32)?;
    let hstart = p;
    let mut p = p;
    for _ in 0..count {
        if body.len() - p < 8 {
            return None;
        }
        let name_len = u32_at(body, p) as i32;
        let val_len = u32_at(body, p + 4) as i32;
        p += 8;
        if name_len < 0 {
            return None;
        }
        let (_, q) = take(body, p, name_len)?;
        let (_, q) = take(body, q, val_len)?;
        p = q;
    }
    if p != body.len() {
        return None;
    }
    Some(Fields {
        timestamp: u64_at(fixed, 0) as i64,
        offset: u64_at(fixed, 8) as i64,
        partition: u32_at(fixed, 16) as i32,
        index: u32_at(fixed, 20),
        key,
        value,
        headers: &body[hstart..],
        header_count: count,
    })
}

/// The size of the fixed part of a trigger (ABI.md section 8.3): timestamp,
/// stream time, wall time (i64 each), kind, key length (u32 each).
pub const TRIGGER_HEADER_SIZE: usize = 32;
/// The largest timer or commit-mark key, in bytes.
pub const MAX_TIMER_KEY_SIZE: usize = MAX_KEY_SIZE;
/// Trigger kinds: a due event-time timer, a due processing-time timer, a
/// key marked in the ending commit window.
pub const TIMER_EVENT_TIME: u32 = 0;
pub const TIMER_PROCESSING_TIME: u32 = 1;
pub const TRIGGER_COMMIT: u32 = 2;
/// The stream time of a task that has seen no record with a timestamp.
pub const NO_TIME: i64 = i64::MIN;
/// The host's default limits.commit_marks: distinct keys one window marks.
pub const DEFAULT_MAX_COMMIT_MARKS: usize = 100_000;
/// The host's default limits.timers: timers one task may have pending.
pub const DEFAULT_MAX_TIMERS: usize = 1_000_000;
/// The host's default limits.timer_firings: timers that fire in one commit
/// window; the rest wait, in order, for the next.
pub const DEFAULT_MAX_FIRINGS_PER_COMMIT: usize = 10_000;
/// Clocks of `time_now`: the task's stream time, the host's wall clock.
pub const CLOCK_STREAM: u32 = 0;
pub const CLOCK_WALL: u32 = 1;

/// The argument check of timer_set and timer_cancel, in the ABI's order
/// (abi/ABI.md section 8.2, Go's abi.CheckTimer): a kind other than event
/// or processing time, or a negative ts, is EINVAL; a key over
/// MAX_TIMER_KEY_SIZE is ETOOLARGE. `None` for valid arguments.
pub fn check_timer(kind: u32, ts: i64, key_len: usize) -> Option<Errno> {
    if (kind != TIMER_EVENT_TIME && kind != TIMER_PROCESSING_TIME) || ts < 0 {
        Some(Errno::INVAL)
    } else if key_len > MAX_TIMER_KEY_SIZE {
        Some(Errno::TOOLARGE)
    } else {
        None
    }
}

/// The order in which due timers fire (Go's abi.TimerLess): by time, then
/// kind (event time first), then key bytes.
pub fn timer_order(a: (u32, i64, &[u8]), b: (u32, i64, &[u8])) -> core::cmp::Ordering {
    (a.1, a.0, a.2).cmp(&(b.1, b.0, b.2))
}

/// What an on_timer or on_commit call is about, decoded from the input
/// buffer; `key` borrows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trigger<'a> {
    pub timestamp: i64,
    pub stream_time: i64,
    pub wall_time: i64,
    pub kind: u32,
    pub key: &'a [u8],
}

/// Decodes a trigger; `None` if the lengths do not add up, the kind is
/// unknown or the key is over MAX_TIMER_KEY_SIZE (the rules of the Go
/// codec, abi/timer.go).
pub fn decode_trigger(src: &[u8]) -> Option<Trigger<'_>> {
    if src.len() < TRIGGER_HEADER_SIZE {
        return None;
    }
    let kind = u32_at(src, 24);
    let n = u32_at(src, 28) as usize;
    if kind > TRIGGER_COMMIT || n > MAX_TIMER_KEY_SIZE || src.len() != TRIGGER_HEADER_SIZE + n {
        return None;
    }
    Some(Trigger {
        timestamp: u64_at(src, 0) as i64,
        stream_time: u64_at(src, 8) as i64,
        wall_time: u64_at(src, 16) as i64,
        kind,
        key: &src[TRIGGER_HEADER_SIZE..],
    })
}

/// Appends t's layout to dst (the fake host's and the tests' encoder).
pub fn encode_trigger(dst: &mut Vec<u8>, t: &Trigger<'_>) {
    dst.extend_from_slice(&t.timestamp.to_le_bytes());
    dst.extend_from_slice(&t.stream_time.to_le_bytes());
    dst.extend_from_slice(&t.wall_time.to_le_bytes());
    dst.extend_from_slice(&t.kind.to_le_bytes());
    dst.extend_from_slice(&(t.key.len() as u32).to_le_bytes());
    dst.extend_from_slice(t.key);
}

/// Iterates over encoded headers that `decode` checked.
#[derive(Clone, Debug)]
pub struct Headers<'a> {
    rest: &'a [u8],
    left: u32,
}

impl<'a> Headers<'a> {
    pub(crate) fn new(encoded: &'a [u8], count: u32) -> Headers<'a> {
        Headers { rest: encoded, left: count }
    }
}

impl<'a> Iterator for Headers<'a> {
    type Item = Header<'a>;
    fn next(&mut self) -> Option<Header<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let b = self.rest;
        let nl = u32_at(b, 0) as usize;
        let vl = u32_at(b, 4) as i32;
        let name = &b[8..8 + nl];
        let (value, end) = if vl < 0 {
            (None, 8 + nl)
        } else {
            (Some(&b[8 + nl..8 + nl + vl as usize]), 8 + nl + vl as usize)
        };
        self.rest = &b[end..];
        Some(Header { name, value })
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

fn len_or_null(b: Option<&[u8]>) -> u32 {
    match b {
        None => u32::MAX, // -1
        Some(b) => b.len() as u32,
    }
}

/// The encoded size of a record with these parts; it saturates at
/// `usize::MAX` (a size no buffer holds) instead of wrapping, so that a
/// record whose parts add up past the address space cannot pass a size
/// check and be written into too small a buffer.
pub fn encoded_size(key: Option<&[u8]>, value: Option<&[u8]>, headers: &[Header<'_>]) -> usize {
    let mut n = HEADER_SIZE.saturating_add(key.map_or(0, |k| k.len())).saturating_add(value.map_or(0, |v| v.len()));
    for h in headers {
        n = n.saturating_add(8).saturating_add(h.name.len()).saturating_add(h.value.map_or(0, |v| v.len()));
    }
    n
}

/// Appends one record layout to `dst`.
#[allow(clippy::too_many_arguments)]
pub fn encode(
    dst: &mut Vec<u8>,
    timestamp: i64,
    offset: i64,
    partition: i32,
    index: u32,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[Header<'_>],
) {
    let n = encoded_size(key, value, headers);
    dst.reserve(n); // a saturated size panics here: capacity overflow
    let at = dst.len();
    // SAFETY: reserve made room for n bytes past the length, and
    // write_record writes exactly encoded_size's bytes (checked below in
    // debug builds); set_len covers only what it wrote.
    unsafe {
        let end = write_record(dst.as_mut_ptr().add(at), timestamp, offset, partition, index, key, value, headers);
        debug_assert_eq!(end as usize - dst.as_ptr() as usize, at + n);
        dst.set_len(at + n);
    }
}

/// Writes one record layout at `p` and returns the end of what it wrote:
/// straight into the destination, as the C SDK does, instead of one
/// appending copy (a capacity check and a length update) per part.
///
/// Safety: `p` has room for `encoded_size(key, value, headers)` bytes, none
/// of which the parts overlap.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(crate) unsafe fn write_record(
    p: *mut u8,
    timestamp: i64,
    offset: i64,
    partition: i32,
    index: u32,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[Header<'_>],
) -> *mut u8 {
    // The fixed fields go into an array first: stores at constant offsets,
    // and one copy of a constant size instead of seven.
    let mut fixed = [0u8; HEADER_SIZE];
    fixed[0..8].copy_from_slice(&timestamp.to_le_bytes());
    fixed[8..16].copy_from_slice(&offset.to_le_bytes());
    fixed[16..20].copy_from_slice(&partition.to_le_bytes());
    fixed[20..24].copy_from_slice(&index.to_le_bytes());
    fixed[24..28].copy_from_slice(&len_or_null(key).to_le_bytes());
    fixed[28..32].copy_from_slice(&len_or_null(value).to_le_bytes());
    fixed[32..36].copy_from_slice(&(headers.len() as u32).to_le_bytes());
    core::ptr::copy_nonoverlapping(fixed.as_ptr(), p, HEADER_SIZE);
    let mut p = p.add(HEADER_SIZE);
    p = put(p, key.unwrap_or(&[]));
    p = put(p, value.unwrap_or(&[]));
    for h in headers {
        let mut lens = [0u8; 8];
        lens[..4].copy_from_slice(&(h.name.len() as u32).to_le_bytes());
        lens[4..].copy_from_slice(&len_or_null(h.value).to_le_bytes());
        p = put(p, &lens);
        p = put(p, h.name);
        p = put(p, h.value.unwrap_or(&[]));
    }
    p
}

/// Copies b to p and returns the end of the copy. Safety: as write_record.
#[inline(always)]
unsafe fn put(p: *mut u8, b: &[u8]) -> *mut u8 {
    core::ptr::copy_nonoverlapping(b.as_ptr(), p, b.len());
    p.add(b.len())
}

/// Splits a scan entry (u32 key length, u32 value length, key, value).
pub fn decode_scan_entry(src: &[u8]) -> Option<(&[u8], &[u8])> {
    if src.len() < SCAN_ENTRY_HEADER_SIZE {
        return None;
    }
    let kl = u32_at(src, 0) as u64;
    let vl = u32_at(src, 4) as u64;
    if src.len() as u64 != SCAN_ENTRY_HEADER_SIZE as u64 + kl + vl {
        return None;
    }
    let k_end = SCAN_ENTRY_HEADER_SIZE + kl as usize;
    Some((&src[SCAN_ENTRY_HEADER_SIZE..k_end], &src[k_end..]))
}

/// Appends one scan entry to `dst`.
pub fn encode_scan_entry(dst: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    dst.extend_from_slice(&(key.len() as u32).to_le_bytes());
    dst.extend_from_slice(&(value.len() as u32).to_le_bytes());
    dst.extend_from_slice(key);
    dst.extend_from_slice(value);
}

// Batches (abi/ABI.md section 10, version 2). The host writes a header and
// one slot per call into the input buffer; the plugin runs the calls in
// order and writes each one's status and staged emits into its slot, then
// the batch's done count. Integers are little-endian u32.

/// The batch header's size; the first slot follows it.
pub const BATCH_HEADER_SIZE: usize = 16;
/// Offsets in the header: the number of slots (host), the number of calls
/// the plugin has finished (plugin), the stop word (host: return after the
/// call in progress).
pub const BATCH_COUNT: usize = 0;
pub const BATCH_DONE: usize = 4;
pub const BATCH_STOP: usize = 8;
/// A slot's header size; the payload follows it.
pub const SLOT_HEADER_SIZE: usize = 24;
/// Offsets in a slot: its kind (host), the call's status, the address and
/// length of its staged emits (plugin), the payload's length (host; the 4
/// bytes just before the payload, so that a record payload is also one emit
/// entry in place).
pub const SLOT_KIND: usize = 0;
pub const SLOT_STATUS: usize = 4;
pub const SLOT_OUT_PTR: usize = 8;
pub const SLOT_OUT_LEN: usize = 12;
pub const SLOT_LEN: usize = 20;
/// Slots start at multiples of this in the input buffer.
pub const BATCH_ALIGN: usize = 8;
/// Slot kinds: a record (as wasmstream_process takes it), a trigger (as
/// wasmstream_on_timer or wasmstream_on_commit takes it, by its kind).
pub const SLOT_RECORD: u32 = 0;
pub const SLOT_TRIGGER: u32 = 1;

/// The bytes one slot with an `n`-byte payload takes, padding included.
pub const fn slot_size(n: usize) -> usize {
    (SLOT_HEADER_SIZE + n + BATCH_ALIGN - 1) & !(BATCH_ALIGN - 1)
}

/// The slot at `off` of the batch `src` (its whole `len` bytes): its kind
/// and the range of its payload in `src`; `None` if the slot does not fit.
/// The SDK's batch loop and the fake host walk batches with it.
pub fn slot_at(src: &[u8], off: usize) -> Option<(u32, core::ops::Range<usize>)> {
    if off > src.len() || src.len() - off < SLOT_HEADER_SIZE {
        return None;
    }
    let n = u32_at(src, off + SLOT_LEN) as usize;
    let start = off + SLOT_HEADER_SIZE;
    if n > src.len() - start {
        return None;
    }
    Some((u32_at(src, off + SLOT_KIND), start..start + n))
}

/// The slots of a batch as the host wrote it: (kind, payload) each, in
/// order; `None` if the count or a slot's length runs past `src`.
pub fn decode_batch(src: &[u8]) -> Option<Vec<(u32, &[u8])>> {
    if src.len() < BATCH_HEADER_SIZE {
        return None;
    }
    let count = u32_at(src, BATCH_COUNT);
    let mut slots = Vec::new();
    let mut off = BATCH_HEADER_SIZE;
    for _ in 0..count {
        let (kind, p) = slot_at(src, off)?;
        off += slot_size(p.len());
        slots.push((kind, &src[p]));
    }
    Some(slots)
}

/// Appends a batch of `slots` (kind, payload) to `dst` as the host writes
/// it: done and stop 0, the plugin's fields of every slot 0 (the fake
/// host's and the tests' encoder).
pub fn encode_batch(dst: &mut Vec<u8>, slots: &[(u32, &[u8])]) {
    dst.extend_from_slice(&(slots.len() as u32).to_le_bytes());
    dst.extend_from_slice(&[0u8; BATCH_HEADER_SIZE - 4]);
    for (kind, p) in slots {
        dst.extend_from_slice(&kind.to_le_bytes());
        dst.extend_from_slice(&[0u8; SLOT_LEN - 4]);
        dst.extend_from_slice(&(p.len() as u32).to_le_bytes());
        dst.extend_from_slice(p);
        dst.resize(dst.len() + slot_size(p.len()) - SLOT_HEADER_SIZE - p.len(), 0);
    }
}

/// Appends one emit entry (a staged emit: u32 length, then the encoded
/// record) to `dst`.
pub fn encode_emit_entry(dst: &mut Vec<u8>, rec: &[u8]) {
    dst.extend_from_slice(&(rec.len() as u32).to_le_bytes());
    dst.extend_from_slice(rec);
}

/// Splits the first emit entry off `src`: the record's bytes (not checked:
/// `decode` does) and the entries after it; `None` if the length runs past
/// `src`.
pub fn next_emit_entry(src: &[u8]) -> Option<(&[u8], &[u8])> {
    if src.len() < 4 {
        return None;
    }
    let n = u32_at(src, 0) as usize;
    if n > src.len() - 4 {
        return None;
    }
    Some((&src[4..4 + n], &src[4 + n..]))
}
