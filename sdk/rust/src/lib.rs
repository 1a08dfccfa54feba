//! Write wasmstream stream processors in Rust.
//!
//! A processor is a function over one borrowed input record. It emits to the
//! outputs and reads and writes the state stores that the processor declares
//! in the host's config, and returns `Ok(())` to commit the record's emits
//! and state writes, or an `Err` to fail the record (the host then applies
//! the processor's error policy: fail, skip or dead-letter).
//!
//! ```text
//! use wasmstream::{Out, Output, Record, Result, Store};
//!
//! static OUT: Output = Output::new("out");
//! static SEEN: Store = Store::new("seen");
//!
//! fn process(r: &Record) -> Result<()> {
//!     let key = r.key().unwrap_or(b"");
//!     if SEEN.get(key)?.is_none() {
//!         SEEN.put(key, b"1")?;
//!         OUT.forward(r)?; // the record as it came
//!     }
//!     Ok(())
//! }
//!
//! wasmstream::processor!(process);
//! ```
//!
//! Build as a `cdylib` for `wasm32-wasi` (Rust <= 1.77, e.g. Debian's 1.63)
//! or `wasm32-wasip1` (rustup, Rust >= 1.78); see README.md. On any other
//! target the host calls go to the fake host in [`testing`], so processors
//! are unit-tested with plain `cargo test`.
//!
//! The crate has no dependencies and mirrors the Go SDK (package `sdk`):
//! the same host semantics, the same error texts. Time (timers, the
//! clocks, commit marks) is in [`timer`], windowed aggregation in
//! [`window`], stream-stream joins in [`join`], with the Go packages'
//! semantics and state layout.

pub mod abi;
pub mod join;
mod layout;
pub mod sys;
pub mod timer;
pub mod window;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;

#[doc(hidden)]
pub mod __rt;

use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};

pub use abi::{Errno, Header, Headers};

/// The error a processor returns, and what the SDK's calls return when the
/// host refuses them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error(Repr);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Repr {
    Host { call: &'static str, name: &'static str, errno: Errno },
    Msg(String),
}

impl Error {
    /// An error with this text; returned from a processor, it is the
    /// reason the host reports for the failed record.
    pub fn msg<S: Into<String>>(text: S) -> Error {
        Error(Repr::Msg(text.into()))
    }

    /// A host call that failed: `call` is the import ("state_put"), `name`
    /// the output or store it addressed ("" for neither).
    pub fn host(call: &'static str, name: &'static str, errno: Errno) -> Error {
        Error(Repr::Host { call, name, errno })
    }

    /// The host's errno, for an error from a host call.
    pub fn errno(&self) -> Option<Errno> {
        match self.0 {
            Repr::Host { errno, .. } => Some(errno),
            Repr::Msg(_) => None,
        }
    }
}

impl fmt::Display for Error {
    /// Reads like the Go SDK's: `sdk: state_put "counts": ETOOLARGE: over the size limit`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Msg(m) => f.write_str(m),
            Repr::Host { call, name, errno } => {
                write!(f, "sdk: {}", call)?;
                if !name.is_empty() {
                    write!(f, " {:?}", name)?;
                }
                write!(f, ": {}", errno)
            }
        }
    }
}

impl std::error::Error for Error {}

impl From<&str> for Error {
    fn from(s: &str) -> Error {
        Error::msg(s)
    }
}

impl From<String> for Error {
    fn from(s: String) -> Error {
        Error::msg(s)
    }
}

/// The result of a processor and of the SDK's calls.
pub type Result<T> = core::result::Result<T, Error>;

fn check(call: &'static str, name: &'static str, r: i32) -> Result<i32> {
    match Errno::of(r) {
        None => Ok(r),
        Some(e) => Err(Error::host(call, name, e)),
    }
}

/// The input record a processor is called with. Its slices borrow the SDK's
/// input buffer: they are valid while the processor runs.
#[derive(Clone, Copy, Debug)]
pub struct Record<'a> {
    f: abi::Fields<'a>,
}

impl<'a> Record<'a> {
    /// The key; `None` is a null key, `Some(b"")` an empty one.
    pub fn key(&self) -> Option<&'a [u8]> {
        self.f.key
    }
    /// The value; `None` is a null value (a tombstone).
    pub fn value(&self) -> Option<&'a [u8]> {
        self.f.value
    }
    /// The headers in order.
    pub fn headers(&self) -> Headers<'a> {
        self.f.headers()
    }
    /// The value of the last header called `name` (`Some(None)` for a null
    /// value), as most Kafka clients' lookups do.
    pub fn header(&self, name: &[u8]) -> Option<Option<&'a [u8]>> {
        self.headers().filter(|h| h.name == name).last().map(|h| h.value)
    }
    /// Milliseconds since the Unix epoch.
    pub fn timestamp(&self) -> i64 {
        self.f.timestamp
    }
    /// The record's input partition.
    pub fn partition(&self) -> i32 {
        self.f.partition
    }
    /// The record's offset in its input partition.
    pub fn offset(&self) -> i64 {
        self.f.offset
    }
    /// The index of the record's topic in the processor's inputs.
    pub fn input(&self) -> u32 {
        self.f.index
    }
}

/// Asks for one on_commit call for `key` at the end of the current commit
/// window (abi/ABI.md section 8.2), however often it is marked in the
/// window: update an aggregate on every record, emit its latest value once
/// per window (what Kafka Streams' record cache does to output volume).
/// `Ok(true)` if the key is newly marked, `Ok(false)` if it already was.
/// `Err` with `Errno::LIMIT` when the window holds `limits.commit_marks`
/// keys: emit at once what the commit call would have. Marks are staged with
/// the record's writes: a failed record leaves none. A processor that calls
/// this must give `processor!` a commit function (`on_commit = f`); the host
/// refuses the module otherwise.
pub fn commit_mark(key: &[u8]) -> Result<bool> {
    check("commit_mark", "", sys::commit_mark(key)).map(|n| n == 1)
}

/// The argument of the commit function: a key marked in the ending commit
/// window. Emits during the call default to its timestamp.
pub struct Commit<'a> {
    t: abi::Trigger<'a>,
}

impl<'a> Commit<'a> {
    /// The marked key.
    pub fn key(&self) -> &'a [u8] {
        self.t.key
    }
    /// The timestamp of the last call that marked the key (the record's).
    pub fn timestamp(&self) -> i64 {
        self.t.timestamp
    }
    /// The task's stream time, or `abi::NO_TIME`.
    pub fn stream_time(&self) -> i64 {
        self.t.stream_time
    }
    /// The host's wall clock for this call, ms since the epoch.
    pub fn wall_time(&self) -> i64 {
        self.t.wall_time
    }
}

/// A record to emit. `None` is null for the key, the value (a tombstone) and
/// header values; a timestamp of 0 means the input record's.
#[derive(Clone, Copy, Debug, Default)]
pub struct Out<'a> {
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: &'a [Header<'a>],
    pub timestamp: i64,
}

impl<'a> Out<'a> {
    /// A record with this key and value, no headers, the input's timestamp.
    pub fn new(key: Option<&'a [u8]>, value: Option<&'a [u8]>) -> Out<'a> {
        Out { key, value, headers: &[], timestamp: 0 }
    }
}

/// A name resolved to a host index once per instance. The cache holds
/// (generation << 32 | index) + 1 ... 0 is unresolved; see `__rt::generation`.
struct Ref {
    name: &'static str,
    cache: AtomicU64,
}

impl Ref {
    const fn new(name: &'static str) -> Ref {
        Ref { name, cache: AtomicU64::new(0) }
    }

    #[inline]
    fn index(&self, call: &'static str, resolve: fn(&[u8]) -> i32) -> Result<u32> {
        let gen = __rt::generation() as u64;
        let c = self.cache.load(Ordering::Relaxed);
        if c != 0 && (c - 1) >> 32 == gen {
            return Ok((c - 1) as u32);
        }
        let i = check(call, self.name, resolve(self.name.as_bytes()))? as u32;
        self.cache.store(((gen << 32) | i as u64) + 1, Ordering::Relaxed);
        Ok(i)
    }
}

/// A named output of the processor (the config's `outputs: name -> topic`).
/// Declare handles as statics with [`output!`]; the name is resolved on
/// first use and cached for the instance's life.
pub struct Output(Ref);

/// Declares an output: `static OUT: Output = wasmstream::output!("out");`.
/// Besides the handle, it writes the name into the module's
/// `wasmstream.handles` section (abi/ABI.md, section 2), which the host
/// checks against the processor's config before the plugin starts: a
/// missing output fails `validate` and every start, naming the field to add
/// it to, not the first record that emits to it. `Output::new` makes a
/// handle without the declaration (for names known only at run time).
#[macro_export]
macro_rules! output {
    ($name:literal) => {{
        $crate::__declare!(b'o', $name);
        $crate::Output::new($name)
    }};
}

/// Declares a store: `static SEEN: Store = wasmstream::store!("seen");`,
/// checked before the plugin starts like [`output!`]'s outputs.
#[macro_export]
macro_rules! store {
    ($name:literal) => {{
        $crate::__declare!(b's', $name);
        $crate::Store::new($name)
    }};
}

/// The declaration record of `output!` and `store!`: kind, length, name, in
/// the module's `wasmstream.handles` custom section (a name of 0 or more
/// than 255 bytes does not compile). Only in Wasm: natively there is no
/// host to read it.
#[doc(hidden)]
#[macro_export]
macro_rules! __declare {
    ($kind:expr, $name:literal) => {
        #[cfg(target_arch = "wasm32")]
        #[link_section = "wasmstream.handles"]
        #[used]
        static DECLARATION: [u8; $crate::__rt::declaration_len($name)] =
            $crate::__rt::declaration::<{ $crate::__rt::declaration_len($name) }>($kind, $name);
    };
}

impl Output {
    /// The output called `name`. Does not call the host.
    pub const fn new(name: &'static str) -> Output {
        Output(Ref::new(name))
    }

    /// The output's name.
    pub fn name(&self) -> &'static str {
        self.0.name
    }

    /// Resolves the output now; an error (ENONAME) if the processor does not
    /// declare it. Call it from the init function to fail at start.
    pub fn check(&self) -> Result<()> {
        self.index().map(|_| ())
    }

    #[inline]
    fn index(&self) -> Result<u32> {
        self.0.index("output_index", sys::output_index)
    }

    /// Emits `r`; the host picks the partition by hashing the key. Staged:
    /// produced only if the current record succeeds. Errors: ETOOLARGE (over
    /// MAX_RECORD_SIZE encoded), ENONAME, EPHASE (during init).
    pub fn emit(&self, r: &Out<'_>) -> Result<()> {
        self.emit_to(abi::ANY_PARTITION, r)
    }

    /// Emits `r` to an explicit partition of the output topic.
    pub fn emit_to(&self, partition: i32, r: &Out<'_>) -> Result<()> {
        let idx = self.index()?;
        let n = abi::encoded_size(r.key, r.value, r.headers);
        if n > abi::MAX_RECORD_SIZE {
            return Err(Error::host("emit", self.0.name, Errno::TOOLARGE));
        }
        let ts = if r.timestamp == 0 { __rt::input_timestamp() } else { r.timestamp };
        // SAFETY: write_record writes the n bytes encoded_size counted.
        let res = unsafe {
            __rt::emit_with(n, |p| {
                abi::write_record(p, ts, abi::NO_OFFSET, partition, idx, r.key, r.value, r.headers)
            })
        };
        check("emit", self.0.name, res).map(|_| ())
    }

    /// Emits the input record `r` as it came (key, value, headers,
    /// timestamp) to this output, the host picking the partition. It sends
    /// the SDK's input buffer itself, with its fixed fields rewritten,
    /// instead of encoding a copy: the cheapest emit there is.
    pub fn forward(&self, r: &Record<'_>) -> Result<()> {
        let idx = self.index()?;
        let res = __rt::forward(&r.f, idx);
        match res {
            Some(res) => check("emit", self.0.name, res).map(|_| ()),
            None => {
                let hs: Vec<Header<'_>> = r.headers().collect();
                self.emit(&Out { key: r.key(), value: r.value(), headers: &hs, timestamp: r.timestamp() })
            }
        }
    }
}

/// A named key-value state store of the processor (declare it with
/// [`store!`]). The host keeps one per task, backs it with a changelog and commits it with the record's outputs.
/// Writes are staged: the record's later reads see them, and they stand only
/// if the record succeeds. Keys are at most MAX_KEY_SIZE bytes, values at
/// most MAX_VALUE_SIZE (ETOOLARGE). An empty value is a value, distinct from
/// a missing key. State calls during init fail with EPHASE.
pub struct Store(Ref);

/// The first buffer a get reads into; a larger value is read again into an
/// exactly sized one.
pub(crate) const GET_BUF: usize = 1024;

impl Store {
    /// The store called `name`. Does not call the host.
    pub const fn new(name: &'static str) -> Store {
        Store(Ref::new(name))
    }

    /// The store's name.
    pub fn name(&self) -> &'static str {
        self.0.name
    }

    /// Resolves the store now; an error (ENONAME) if it is not declared.
    pub fn check(&self) -> Result<()> {
        self.index().map(|_| ())
    }

    #[inline]
    fn index(&self) -> Result<u32> {
        self.0.index("store_index", sys::store_index)
    }

    /// The value of `key`, `None` if it has none.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut v = Vec::new();
        Ok(if self.get_into(key, &mut v)? { Some(v) } else { None })
    }

    /// Reads the value of `key` into `out` (replacing its contents) and
    /// reports whether there is one; reusing `out` across records avoids an
    /// allocation per read.
    pub fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let idx = self.index()?;
        out.clear();
        // The first read goes to the SDK's get buffer; a value that fits is
        // copied out. A larger one is read again straight into `out`, sized
        // to it; a third read only happens if it changed size in between,
        // which a host serving one record at a time never does: the bound
        // turns a broken host into an error.
        let n = __rt::with_get_buf(|buf| {
            let n = sys::state_get(idx, key, buf);
            if n >= 0 && n as usize <= buf.len() {
                out.extend_from_slice(&buf[..n as usize]);
            }
            n
        });
        if n == -Errno::NOTFOUND.0 {
            return Ok(false);
        }
        let mut want = check("state_get", self.0.name, n)? as usize;
        if want <= GET_BUF {
            return Ok(true);
        }
        for _ in 0..2 {
            out.resize(want, 0);
            let n = sys::state_get(idx, key, out);
            if n == -Errno::NOTFOUND.0 {
                out.clear();
                return Ok(false);
            }
            let n = match check("state_get", self.0.name, n) {
                Ok(n) => n as usize,
                Err(e) => {
                    out.clear();
                    return Err(e);
                }
            };
            if n <= want {
                out.truncate(n);
                return Ok(true);
            }
            want = n;
        }
        out.clear();
        Err(Error::host("state_get", self.0.name, Errno::IO))
    }

    /// Sets `key` to `value`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let idx = self.index()?;
        check("state_put", self.0.name, sys::state_put(idx, key, value)).map(|_| ())
    }

    /// Removes `key`; removing a missing key is not an error.
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        let idx = self.index()?;
        check("state_delete", self.0.name, sys::state_delete(idx, key)).map(|_| ())
    }

    /// A scan over the keys `start <= k < end` in byte order, with the
    /// record's staged writes applied; an empty `end` means no upper bound.
    /// At most MAX_OPEN_CURSORS scans may be open in one record (ELIMIT);
    /// a Scan closes its cursor when exhausted or dropped.
    pub fn scan(&self, start: &[u8], end: &[u8]) -> Result<Scan> {
        let idx = self.index()?;
        let c = check("scan_open", self.0.name, sys::scan_open(idx, start, end))?;
        Ok(Scan { store: self.0.name, cursor: c as u32, open: true, buf: Vec::new() })
    }

    /// A scan over the keys that start with `prefix`.
    pub fn scan_prefix(&self, prefix: &[u8]) -> Result<Scan> {
        self.scan(prefix, &prefix_end(prefix))
    }
}

/// The smallest key greater than every key with the prefix; empty (no upper
/// bound) when there is none (an empty or all-0xff prefix).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last != 0xff {
            end.push(last + 1);
            return end;
        }
    }
    end
}

/// The first entry buffer of a scan; it grows to fit larger entries.
const SCAN_BUF: usize = 512;

/// An open scan. `next` lends each entry until the following call:
///
/// ```text
/// let mut s = store.scan(b"a", b"b")?;
/// while let Some((key, value)) = s.next()? { use_it(key, value); }
/// ```
pub struct Scan {
    store: &'static str,
    cursor: u32,
    open: bool,
    buf: Vec<u8>,
}

impl Scan {
    /// The next entry, `None` at the end (which closes the cursor).
    #[allow(clippy::should_implement_trait)] // lends its entries: not an Iterator
    pub fn next(&mut self) -> Result<Option<(&[u8], &[u8])>> {
        if !self.open {
            return Ok(None);
        }
        if self.buf.is_empty() {
            self.buf.resize(SCAN_BUF, 0);
        }
        for _ in 0..3 {
            let n = sys::scan_next(self.cursor, &mut self.buf);
            if n == 0 {
                self.close_cursor()?;
                return Ok(None);
            }
            let n = match check("scan_next", self.store, n) {
                Ok(n) => n as usize,
                Err(e) => {
                    let _ = self.close_cursor();
                    return Err(e);
                }
            };
            if n <= self.buf.len() {
                return match abi::decode_scan_entry(&self.buf[..n]) {
                    Some(kv) => Ok(Some(kv)),
                    None => Err(Error::host("scan_next", self.store, Errno::INVAL)),
                };
            }
            let grown = n.max(2 * self.buf.len());
            self.buf.resize(grown, 0);
        }
        let _ = self.close_cursor();
        Err(Error::host("scan_next", self.store, Errno::IO))
    }

    /// Closes the cursor now, reporting the host's error if any.
    pub fn close(mut self) -> Result<()> {
        self.close_cursor()
    }

    fn close_cursor(&mut self) -> Result<()> {
        if !self.open {
            return Ok(());
        }
        self.open = false;
        check("scan_close", self.store, sys::scan_close(self.cursor)).map(|_| ())
    }
}

impl Drop for Scan {
    fn drop(&mut self) {
        let _ = self.close_cursor();
    }
}

/// The processor's configuration: its `config` map in the host's config
/// file, as JSON text (`{}` or empty for none). The SDK does not parse it.
pub fn config() -> Vec<u8> {
    let mut small = [0u8; 512];
    let n = sys::config(&mut small);
    if n < 0 {
        return Vec::new();
    }
    let n = n as usize;
    if n <= small.len() {
        return small[..n].to_vec();
    }
    let mut v = vec![0u8; n];
    if sys::config(&mut v) as usize != n {
        return Vec::new(); // the config changed under us: not a host this SDK knows
    }
    v
}

/// A log level, ordered like Go's log/slog.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug = 0,
    Info = 1,
    Warn = 2,
    Error = 3,
}

/// Writes `msg` to the host's log, tagged with the processor's name; cut at
/// MAX_LOG_SIZE bytes. Logging never fails the record.
pub fn log(level: Level, msg: &str) {
    sys::log(level as u32, msg.as_bytes());
}

/// `log(Level::Debug, msg)`.
pub fn debug(msg: &str) {
    log(Level::Debug, msg)
}
/// `log(Level::Info, msg)`.
pub fn info(msg: &str) {
    log(Level::Info, msg)
}
/// `log(Level::Warn, msg)`.
pub fn warn(msg: &str) {
    log(Level::Warn, msg)
}
/// `log(Level::Error, msg)`.
pub fn error(msg: &str) {
    log(Level::Error, msg)
}

/// An output or store handle that `processor!`'s `handles = [...]` resolves
/// when the instance starts.
pub trait Handle: Sync {
    /// "output" or "store".
    fn kind(&self) -> &'static str;
    /// The name the processor's config declares it under.
    fn name(&self) -> &'static str;
    /// Resolves the name now (ENONAME if the processor does not declare it).
    fn check(&self) -> Result<()>;
}

impl Handle for Output {
    fn kind(&self) -> &'static str {
        "output"
    }
    fn name(&self) -> &'static str {
        self.0.name
    }
    fn check(&self) -> Result<()> {
        Output::check(self)
    }
}

impl Handle for Store {
    fn kind(&self) -> &'static str {
        "store"
    }
    fn name(&self) -> &'static str {
        self.0.name
    }
    fn check(&self) -> Result<()> {
        Store::check(self)
    }
}

/// Resolves `handles` (the instance's start, before the init function):
/// the names the processor's config does not declare fail the start, all
/// of them in one message that says where to add them. The same text as
/// the Go and C SDKs: outputs first, then stores, each by name.
pub fn check_handles(handles: &[&dyn Handle]) -> Result<()> {
    let mut missing: Vec<(&'static str, &'static str)> = Vec::new();
    for h in handles {
        if let Err(e) = h.check() {
            if e.errno() != Some(Errno::NONAME) {
                return Err(e);
            }
            missing.push((h.kind(), h.name()));
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    // "output" < "store": outputs first.
    missing.sort();
    missing.dedup();
    let list: Vec<String> = missing.iter().map(|(k, n)| format!("{} {:?}", k, n)).collect();
    Err(Error::msg(format!(
        "sdk: not declared by the processor (add to its outputs or stores in the pipeline config): {}",
        list.join(", ")
    )))
}

/// The body of wasmstream_init: the handles, then the init function.
#[doc(hidden)]
pub fn __init(handles: &[&dyn Handle], init: fn() -> Result<()>) -> i32 {
    if let Err(e) = check_handles(handles) {
        return __rt::fail_err(&e);
    }
    __rt::init(init)
}

/// Exports the processor. The forms:
///
/// ```text
/// processor!(process);
/// processor!(process, init);
/// processor!(process, init, handles = [OUT, SEEN], on_timer = fired, on_commit = committed);
/// processor!(process, handles = [OUT, SEEN]);   // the clauses without an init function
/// ```
///
/// `process: fn(&Record) -> Result<()>` runs once per record; `init: fn() ->
/// Result<()>` once per instance before the first record (read the config
/// there; emits and state calls are refused during init). The clauses, in
/// any order, each optional:
///
/// - `handles = [..]`: the processor's `Output` and `Store` statics, resolved
///   when the instance starts (before `init`), so that a deployment whose
///   config lacks one of them is refused at start (and by `wasmstream
///   validate`) with a message naming each, instead of failing records.
/// - `on_timer = f`, `f: fn(&timer::Firing) -> Result<()>`: called once per
///   due timer (module `timer`); required by a processor that sets timers.
/// - `on_commit = f`, `f: fn(&Commit) -> Result<()>`: called once per key
///   marked in the ending commit window (`commit_mark`); required by a
///   processor that marks keys.
///
/// Use it once, in the cdylib's root.
#[macro_export]
macro_rules! processor {
    ($process:path) => {
        $crate::processor!($process, $crate::__rt::no_init);
    };
    // Clauses without an init function.
    ($process:path, handles = $($rest:tt)*) => {
        $crate::__processor!(@munch $process, $crate::__rt::no_init, [] [] [] handles = $($rest)*);
    };
    ($process:path, on_timer = $($rest:tt)*) => {
        $crate::__processor!(@munch $process, $crate::__rt::no_init, [] [] [] on_timer = $($rest)*);
    };
    ($process:path, on_commit = $($rest:tt)*) => {
        $crate::__processor!(@munch $process, $crate::__rt::no_init, [] [] [] on_commit = $($rest)*);
    };
    ($process:path, $init:path $(, $($rest:tt)*)?) => {
        $crate::__processor!(@munch $process, $init, [] [] [] $($($rest)*)?);
    };
}

/// Exports the processor's state migration (abi/ABI.md section 13):
/// `f: fn(&str) -> Result<()>` runs once per task, before this version's
/// first call on the task's stores, when they were last written by
/// another version, whose ID (`"<label>@<hash prefix>"`) it gets. It may
/// use every `Store` (get, put, delete, scan) as a record may, but not
/// emit or set timers (`Errno::PHASE`). It is bounded like one record; an
/// error, a panic or a limit fails it: nothing it wrote stays and the host
/// rolls the processor back to the version before.
///
/// ```text
/// processor!(process);
/// migrate!(migrate_counts);
/// ```
///
/// Use it once, in the cdylib's root, beside `processor!`. A processor
/// without it has no migration: its stores pass to the next version as
/// they are.
#[macro_export]
macro_rules! migrate {
    ($f:path) => {
        /// abi/ABI.md section 13: the state migration.
        #[cfg(target_arch = "wasm32")]
        #[no_mangle]
        pub extern "C" fn wasmstream_migrate(len: u32) -> i32 {
            $crate::__rt::migrate(len, $f)
        }

        #[cfg(not(target_arch = "wasm32"))]
        #[doc(hidden)]
        pub static __WASMSTREAM_MIGRATE: fn(&str) -> $crate::Result<()> = $f;
    };
}

/// `Some(f)` as the function type `t`, or `None` without `f`: a callback
/// of `processor!` for wasmstream_batch.
#[doc(hidden)]
#[macro_export]
macro_rules! __opt {
    ($t:ty;) => {
        None::<$t>
    };
    ($t:ty; $f:path) => {
        Some($f as $t)
    };
}

/// The clauses of `processor!`, gathered one at a time: [on_timer]
/// [on_commit] [handles].
#[doc(hidden)]
#[macro_export]
macro_rules! __processor {
    (@munch $p:path, $i:path, [$($t:path)?] [$($c:path)?] [$($h:expr),* $(,)?]
        handles = [$($nh:expr),* $(,)?] $(, $($rest:tt)*)?) => {
        $crate::__processor!(@munch $p, $i, [$($t)?] [$($c)?] [$($h,)* $($nh),*] $($($rest)*)?);
    };
    (@munch $p:path, $i:path, [] [$($c:path)?] [$($h:expr),* $(,)?]
        on_timer = $nt:path $(, $($rest:tt)*)?) => {
        $crate::__processor!(@munch $p, $i, [$nt] [$($c)?] [$($h),*] $($($rest)*)?);
    };
    (@munch $p:path, $i:path, [$($t:path)?] [] [$($h:expr),* $(,)?]
        on_commit = $nc:path $(, $($rest:tt)*)?) => {
        $crate::__processor!(@munch $p, $i, [$($t)?] [$nc] [$($h),*] $($($rest)*)?);
    };
    (@munch $process:path, $init:path, [$($on_timer:path)?] [$($on_commit:path)?] [$($h:expr),* $(,)?]) => {
        /// The ABI version markers; never called. Version 2 (batches)
        /// on a host that speaks it, version 1 on an older one.
        #[cfg(target_arch = "wasm32")]
        #[no_mangle]
        pub extern "C" fn wasmstream_abi_version_1() {}

        #[cfg(target_arch = "wasm32")]
        #[no_mangle]
        pub extern "C" fn wasmstream_abi_version_2() {}

        /// The WASI reactor initializer: runs the static constructors
        /// (wasi-libc's environment setup among them) once. Without an
        /// explicit call to __wasm_call_ctors, wasm-ld wraps every export
        /// in one, which ran them, WASI calls included, on every record.
        #[cfg(target_arch = "wasm32")]
        #[no_mangle]
        pub extern "C" fn _initialize() {
            extern "C" {
                fn __wasm_call_ctors();
            }
            unsafe { __wasm_call_ctors() }
        }

        /// abi/ABI.md section 3: the input buffer.
        #[cfg(target_arch = "wasm32")]
        #[no_mangle]
        pub extern "C" fn wasmstream_input(size: u32) -> u32 {
            $crate::__rt::input(size) as usize as u32
        }

        /// abi/ABI.md section 3: process the record in the input buffer.
        #[cfg(target_arch = "wasm32")]
        #[no_mangle]
        pub extern "C" fn wasmstream_process(len: u32) -> i32 {
            $crate::__rt::process(len, $process)
        }

        /// abi/ABI.md section 10: the calls of a batch, each through the
        /// same function as its single-call export.
        #[cfg(target_arch = "wasm32")]
        #[no_mangle]
        pub extern "C" fn wasmstream_batch(len: u32) -> i32 {
            $crate::__rt::batch(
                len,
                $process,
                $crate::__opt!($crate::__rt::TimerFn; $($on_timer)?),
                $crate::__opt!($crate::__rt::CommitFn; $($on_commit)?),
            )
        }

        /// abi/ABI.md section 3: once per instance, before the first record.
        #[cfg(target_arch = "wasm32")]
        #[no_mangle]
        pub extern "C" fn wasmstream_init() -> i32 {
            let handles: &[&dyn $crate::Handle] = &[$(&$h),*];
            // Without handles, the check and its text are not linked.
            if handles.is_empty() {
                return $crate::__rt::init($init);
            }
            $crate::__init(handles, $init)
        }

        $(
            /// abi/ABI.md section 8.3: a due timer.
            #[cfg(target_arch = "wasm32")]
            #[no_mangle]
            pub extern "C" fn wasmstream_on_timer(len: u32) -> i32 {
                $crate::timer::__on_timer(len, $on_timer)
            }

            #[cfg(not(target_arch = "wasm32"))]
            #[doc(hidden)]
            pub static __WASMSTREAM_ON_TIMER: fn(&$crate::timer::Firing<'_>) -> $crate::Result<()> = $on_timer;
        )?

        $(
            /// abi/ABI.md section 8.3: a key marked in the ending commit window.
            #[cfg(target_arch = "wasm32")]
            #[no_mangle]
            pub extern "C" fn wasmstream_on_commit(len: u32) -> i32 {
                $crate::__rt::on_commit(len, $on_commit)
            }

            #[cfg(not(target_arch = "wasm32"))]
            #[doc(hidden)]
            pub static __WASMSTREAM_ON_COMMIT: fn(&$crate::Commit<'_>) -> $crate::Result<()> = $on_commit;
        )?

        /// Natively the exports are not built; this names the processor
        /// and its handles (and keeps its functions from being reported
        /// unused); `testing::Host::handles` takes the same list.
        #[cfg(not(target_arch = "wasm32"))]
        #[doc(hidden)]
        pub static __WASMSTREAM_PROCESSOR: (
            fn(&$crate::Record<'_>) -> $crate::Result<()>,
            fn() -> $crate::Result<()>,
            &[&dyn $crate::Handle],
        ) = ($process, $init, &[$(&$h),*]);
    };
}
