//! The Rust SDK's processor of the ABI conformance suite
//! (host/internal/conformance/README.md has the script it follows, the same
//! in every language). It is not a plugin to deploy.

use wasmstream::{abi, sys, Errno, Error, Header, Out, Output, Record, Result, Store};

static OUT: Output = Output::new("out");
static SIDE: Output = Output::new("side");
static KV: Store = Store::new("kv");
static AUX: Store = Store::new("aux");

wasmstream::processor!(process, init);

fn init() -> Result<()> {
    wasmstream::info(&format!("init config {}", wasmstream::config().len()));
    let e1 = OUT.emit(&Out::default());
    let e2 = KV.get(b"k");
    wasmstream::info(&format!("init emit {} get {}", res(&e1), res(&e2)));
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
}

#[cfg(not(target_arch = "wasm32"))]
unsafe fn emit_at(_: u32, _: u32) -> i32 {
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
        b"nooutput" => {
            let mut rec = Vec::new();
            abi::encode(&mut rec, 0, abi::NO_OFFSET, abi::ANY_PARTITION, 9, Some(b"k"), None, &[]);
            sys::emit(&rec);
            Ok(())
        }
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
