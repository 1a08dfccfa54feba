//! The Rust SDK's processor of the ABI conformance suite
//! (host/internal/conformance/README.md has the script it follows, the same
//! in every language). It is not a plugin to deploy.

use wasmstream::timer::{self, Firing};
use wasmstream::{abi, sys, Commit, Errno, Error, Header, Out, Output, Record, Result, Store};

static OUT: Output = Output::new("out");
static SIDE: Output = Output::new("side");
static KV: Store = Store::new("kv");
static AUX: Store = Store::new("aux");

wasmstream::processor!(process, init, handles = [OUT, SIDE, KV, AUX], on_timer = fired, on_commit = committed);

fn init() -> Result<()> {
    wasmstream::info(&format!("init config {}", wasmstream::config().len()));
    let e1 = OUT.emit(&Out::default());
    let e2 = KV.get(b"k");
    wasmstream::info(&format!("init emit {} get {}", res(&e1), res(&e2)));
    wasmstream::info(&init_time());
    OUT.check()?;
    SIDE.check()?;
    KV.check()?;
    AUX.check()
}

/// An SDK call's result in the script's words: ok or the errno name.
fn res<T>(r: &Result<T>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => match e.errno() {
            Some(n) => n.name().into(),
            None => e.to_string(),
        },
    }
}

/// A raw host result: a decimal number or the errno name.
fn raw(r: i32) -> String {
    match Errno::of(r) {
        Some(e) => e.name().into(),
        None => r.to_string(),
    }
}

fn get(s: &Store, key: &[u8]) -> String {
    match s.get(key) {
        Err(e) => res::<()>(&Err(e)),
        Ok(None) => "missing".into(),
        Ok(Some(v)) => format!("found:{}", String::from_utf8_lossy(&v)),
    }
}

wasmstream::migrate!(migrate_from);

/// The migration script (README.md, "Migration").
fn migrate_from(from: &str) -> Result<()> {
    let emitted = res(&OUT.emit(&Out::new(Some(b"lost"), None)));
    let timer = res(&timer::set(timer::EVENT_TIME, 1, b"k"));
    let counter = get(&KV, b"counter");
    for (k, v) in [("migrated-from", from), ("migrate-emit", &emitted), ("migrate-timer", &timer), ("migrate-counter", &counter)] {
        KV.put(k.as_bytes(), v.as_bytes())?;
    }
    if from == "fail" {
        return Err(Error::msg("conformance: migration refused"));
    }
    Ok(())
}

fn note(step: &str, text: &str) -> Result<()> {
    SIDE.emit(&Out::new(Some(step.as_bytes()), Some(text.as_bytes())))
}

fn notes(pairs: &[(&str, String)]) -> Result<()> {
    for (k, v) in pairs {
        note(k, v)?;
    }
    Ok(())
}

#[cfg(target_arch = "wasm32")]
#[allow(clashing_extern_declarations)]
#[link(wasm_import_module = "wasmstream")]
extern "C" {
    #[link_name = "emit"]
    fn emit_at(ptr: u32, len: u32) -> i32;
    #[link_name = "timer_set"]
    fn timer_set_at(kind: u32, ts: i64, ptr: u32, len: u32) -> i32;
}

/// Loads a byte far outside linear memory: a Wasm trap (out of bounds
/// memory access), the same in every language.
#[cfg(target_arch = "wasm32")]
fn trap() {
    unsafe { core::ptr::read_volatile(0xFFFF_FFF0usize as *const u8) };
}

#[cfg(not(target_arch = "wasm32"))]
fn trap() {
    unreachable!("conformance: a raw address exists only in Wasm")
}

#[cfg(not(target_arch = "wasm32"))]
unsafe fn emit_at(_: u32, _: u32) -> i32 {
    unreachable!("conformance: a raw address exists only in Wasm")
}

#[cfg(not(target_arch = "wasm32"))]
unsafe fn timer_set_at(_: u32, _: i64, _: u32, _: u32) -> i32 {
    unreachable!("conformance: a raw address exists only in Wasm")
}

fn process(r: &Record) -> Result<()> {
    let key = r.key().unwrap_or(b"");
    if !key.starts_with(b"cmd:") {
        return echo(r);
    }
    match &key[4..] {
        b"state" => state(),
        b"scan" => scan(),
        b"config" => OUT.emit(&Out::new(Some(b"config"), Some(&wasmstream::config()))),
        b"log" => {
            wasmstream::debug("debug line");
            wasmstream::info("info line");
            wasmstream::warn("warn line");
            wasmstream::error("error line");
            let r4 = sys::log(4, b"bad");
            wasmstream::info(&"L".repeat(5000));
            notes(&[("log-level-4", raw(r4)), ("log", "ok".into())])
        }
        b"names" => note(
            "names",
            &format!(
                "{} {} {} {} {}",
                raw(sys::output_index(b"side")),
                raw(sys::store_index(b"aux")),
                raw(sys::store_index(b"kv")),
                raw(sys::output_index(b"nope")),
                raw(sys::store_index(b"nope"))
            ),
        ),
        b"headers" => {
            let hs = [
                Header { name: b"a", value: Some(b"1") },
                Header { name: b"null", value: None },
                Header { name: b"empty", value: Some(b"") },
                Header { name: b"", value: Some(b"noname") },
                Header { name: b"a", value: Some(b"2") },
            ];
            OUT.emit(&Out { key: Some(b""), value: None, headers: &hs, timestamp: 123 })?;
            OUT.emit(&Out::new(None, Some(b"")))?;
            SIDE.emit_to(5, &Out::new(Some(b"p5"), Some(b"v")))?;
            SIDE.emit_to(0, &Out::default())
        }
        b"rawemit" => notes(&[
            ("emit-huge", raw(sys::emit(&vec![0u8; abi::MAX_RECORD_SIZE + 1]))),
            ("emit-malformed", raw(sys::emit(&[0u8; 10]))),
        ]),
        b"fail" => {
            KV.put(b"fail-k", b"x")?;
            OUT.emit(&Out::new(Some(b"lost"), None))?;
            Err("conformance: rejected on purpose".into())
        }
        b"fault" => {
            unsafe { emit_at(0xFFFF_FF00, 1000) };
            Ok(())
        }
        b"trap" => {
            trap();
            Ok(())
        }
        // Rust only (TestRustPanicInBatch): a panic aborts, so it traps.
        b"panic" => panic!("conformance: panic on purpose"),
        b"nooutput" => {
            let mut rec = Vec::new();
            abi::encode(&mut rec, 0, abi::NO_OFFSET, abi::ANY_PARTITION, 9, Some(b"k"), None, &[]);
            sys::emit(&rec);
            Ok(())
        }
        b"now" => now(),
        b"timers" => timers(),
        b"mark" => marks(),
        b"timerfault" => {
            unsafe { timer_set_at(timer::EVENT_TIME, 1, 0xFFFF_FF00, 100) };
            Ok(())
        }
        b"noop" => Ok(()),
        b"eio" => {
            let e = KV.get(b"eio");
            Err(Error::msg(format!("conformance: eio {}", res(&e))))
        }
        _ => Err(Error::msg(format!("conformance: unknown command {}", String::from_utf8_lossy(key)))),
    }
}

fn echo(r: &Record) -> Result<()> {
    let hs: Vec<Header> = r.headers().collect();
    OUT.emit(&Out { key: r.key(), value: r.value(), headers: &hs, timestamp: r.timestamp() })?;
    SIDE.emit_to(r.partition() & 3, &Out::new(r.value(), r.key()))?;
    SIDE.forward(r)
}

fn state() -> Result<()> {
    let k = b"k";
    note("get-missing", &get(&KV, k))?;
    notes(&[("put-empty", res(&KV.put(k, b""))), ("get-empty", get(&KV, k))])?;
    notes(&[("put-v1", res(&KV.put(k, b"v1"))), ("get-staged", get(&KV, k))])?;
    let (e1, e2) = (KV.delete(k), KV.delete(k));
    let both = if e1.is_err() { e1 } else { e2 };
    notes(&[("delete-twice", res(&both)), ("get-deleted", get(&KV, k))])?;
    notes(&[("put-aux", res(&AUX.put(k, b"aux"))), ("get-other-store", get(&KV, k)), ("get-aux", get(&AUX, k))])?;
    let big: Vec<u8> = (0..200_000usize).map(|i| (i * 7 % 251) as u8).collect();
    KV.put(b"big", &big)?;
    let v = KV.get(b"big")?.unwrap_or_default();
    OUT.emit(&Out::new(Some(b"get-big"), Some(&v)))?;
    let long = vec![b'k'; abi::MAX_KEY_SIZE + 1];
    notes(&[
        ("put-long-key", res(&KV.put(&long, b""))),
        ("get-long-key", get(&KV, &long)),
        ("put-huge-value", res(&KV.put(b"huge", &vec![0u8; abi::MAX_VALUE_SIZE + 1]))),
        ("put-max-value", res(&KV.put(b"max", &vec![0u8; abi::MAX_VALUE_SIZE]))),
    ])?;
    KV.delete(b"max")?;
    let n: u64 = match KV.get(b"counter")? {
        Some(c) => String::from_utf8_lossy(&c).parse().unwrap_or(0),
        None => 0,
    };
    let next = (n + 1).to_string();
    KV.put(b"counter", next.as_bytes())?;
    note("counter", &next)
}

fn walk(start: &[u8], end: &[u8], mut f: impl FnMut(&[u8], &[u8]) -> Result<()>) -> Result<()> {
    let mut s = KV.scan(start, end)?;
    while let Some((k, v)) = s.next()? {
        f(k, v)?;
    }
    Ok(())
}

fn scan() -> Result<()> {
    let puts: [(&[u8], Vec<u8>); 5] = [
        (b"s/a", vec![b'a'; 10]),
        (b"s/b", vec![b'b'; 700]),
        (b"s/c", vec![b'c'; 70000]),
        (b"s/d", Vec::new()),
        (b"t/x", b"x".to_vec()),
    ];
    for (k, v) in puts.iter() {
        KV.put(k, v)?;
    }
    walk(b"s/", b"s0", |k, v| OUT.emit(&Out::new(Some(k), Some(v))))?;
    walk(b"s/b", b"s/d", |k, v| SIDE.emit(&Out::new(Some(k), Some(v))))?;
    walk(b"s/c", b"", |k, v| OUT.emit(&Out::new(Some(k), Some(v.len().to_string().as_bytes()))))?;
    let mut s = KV.scan_prefix(b"s/")?;
    s.next()?;
    note("scan-close", &res(&s.close()))?;
    let mut open = Vec::new();
    for _ in 0..abi::MAX_OPEN_CURSORS {
        open.push(KV.scan(b"", b"")?);
    }
    let e17 = KV.scan(b"", b"");
    drop(open);
    let mut buf = [0u8; 64];
    let next_bad = raw(sys::scan_next(999, &mut buf));
    notes(&[
        ("cursor-17", res(&e17)),
        ("next-bad", next_bad),
        ("close-bad", raw(sys::scan_close(999))),
        ("get-bad-store", raw(sys::state_get(7, b"k", &mut buf))),
        ("scan-bad-store", raw(sys::scan_open(7, b"", b""))),
    ])
}

// The time script (README.md, "Time").

/// init's time line: every time call is refused during init.
fn init_time() -> String {
    format!(
        "init time set {} cancel {} stream {} wall {} mark {}",
        res(&timer::set(timer::EVENT_TIME, 1, b"k")),
        res(&timer::cancel(timer::EVENT_TIME, 1, b"k")),
        res(&timer::stream_time()),
        res(&timer::wall_time()),
        res(&timer::mark(b"k"))
    )
}

/// A time call's result in the script's words: 1, 0 or the errno's name.
fn changed(r: Result<bool>) -> String {
    match r {
        Ok(true) => "1".into(),
        Ok(false) => "0".into(),
        Err(_) => res(&r),
    }
}

fn now() -> Result<()> {
    let (st, wt) = (timer::stream_time()?, timer::wall_time()?);
    notes(&[("now", format!("{} {}", st, wt)), ("now-bad-clock", raw(sys::time_now(2) as i32))])
}

fn timers() -> Result<()> {
    use timer::{cancel, set, EVENT_TIME as E, PROCESSING_TIME as P};
    let (k, big) = (&b"k"[..], vec![0u8; abi::MAX_TIMER_KEY_SIZE + 1]);
    notes(&[
        ("set-new", changed(set(E, 5000, b"a"))),
        ("set-again", changed(set(E, 5000, b"a"))),
        ("set-processing", changed(set(P, 5000, b"a"))),
        ("set-empty-key", changed(set(E, 4000, b""))),
        ("cancel", changed(cancel(P, 5000, b"a"))),
        ("cancel-again", changed(cancel(P, 5000, b"a"))),
        ("set-kind-2", changed(set(2, 1, k))),
        ("set-kind-7", changed(set(7, 1, k))),
        ("set-negative", changed(set(E, -1, k))),
        ("set-long-key", changed(set(E, 1, &big))),
        ("set-order", changed(set(9, -1, &big))),
        ("cancel-kind-2", changed(cancel(2, 1, k))),
        ("cancel-long-key", changed(cancel(E, 1, &big))),
        ("set-max-key", changed(set(E, 9000, &vec![b'm'; abi::MAX_TIMER_KEY_SIZE]))),
    ])?;
    let wall = timer::wall_time()?;
    for (kind, ts, key) in [(E, 6000, "fail"), (E, 6000, "chain"), (P, wall + 5000, "p"), (E, 7000, "fault"), (E, 7000, "zzz")] {
        set(kind, ts, key.as_bytes())?;
    }
    // Up to the task's limit; then the ones set are cancelled again.
    let mut n = 0;
    let mut limit: Result<bool> = Ok(true);
    while n < 10 {
        limit = set(E, 100_000 + n, b"l");
        if limit.is_err() {
            break;
        }
        n += 1;
    }
    for j in 0..n {
        cancel(E, 100_000 + j, b"l")?;
    }
    note("set-limit", &format!("{} {}", n, res(&limit)))
}

fn marks() -> Result<()> {
    notes(&[("mark-new", changed(timer::mark(b"m2"))), ("mark-again", changed(timer::mark(b"m2")))])?;
    timer::mark(b"m1")?;
    timer::mark(b"cfail")?;
    let long = changed(timer::mark(&vec![0u8; abi::MAX_TIMER_KEY_SIZE + 1]));
    let mut n = 0;
    let mut limit: Result<bool> = Ok(true);
    while n < 10 {
        limit = timer::mark(format!("x{}", n).as_bytes());
        if limit.is_err() {
            break;
        }
        n += 1;
    }
    notes(&[("mark-long-key", long), ("mark-limit", format!("{} {}", n, res(&limit)))])
}

fn fired(f: &Firing) -> Result<()> {
    let kind = if f.kind() == timer::EVENT_TIME { "event" } else { "processing" };
    note("fired", &format!("{} {} {} {} {}", kind, f.time(), f.stream_time(), f.wall_time(), f.key().len()))?;
    match f.key() {
        b"fail" => {
            KV.put(b"timer-fail", b"x")?;
            timer::set(timer::EVENT_TIME, 6500, b"lost")?;
            timer::mark(b"lost-mark")?;
            Err("conformance: timer failed on purpose".into())
        }
        b"chain" => {
            let set = changed(timer::set(timer::EVENT_TIME, f.time(), b"chain2"));
            notes(&[("chain-set", set), ("chain-mark", changed(timer::mark(b"t-chain")))])
        }
        b"fault" => {
            unsafe { emit_at(0xFFFF_FF00, 1000) };
            Ok(())
        }
        _ => Ok(()),
    }
}

fn committed(c: &Commit) -> Result<()> {
    let again = timer::mark(b"again");
    notes(&[
        (
            "commit",
            format!("{} {} {} {}", String::from_utf8_lossy(c.key()), c.timestamp(), c.stream_time(), c.wall_time()),
        ),
        ("commit-mark", res(&again)),
    ])?;
    if c.key() == b"cfail" {
        return Err("conformance: commit failed on purpose".into());
    }
    Ok(())
}
