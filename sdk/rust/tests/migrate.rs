//! State migration (abi/ABI.md section 13) against the fake host: a version
//! that stored counts as JSON text, `{"n":5}`, and one that migrates them
//! to 8 bytes big-endian; the Go SDK's sdk/migrate test, in Rust.

use wasmstream::testing::{Host, Input};
use wasmstream::timer::{self, EVENT_TIME};
use wasmstream::{Errno, Error, Out, Output, Record, Result, Store};

static OUT: Output = Output::new("out");
static COUNTS: Store = Store::new("counts");

fn nothing(_: &Record) -> Result<()> {
    Ok(())
}

/// The migration: every JSON count becomes 8 bytes big-endian. It reads the
/// whole store first, then writes.
fn to_binary(from: &str) -> Result<()> {
    if !from.starts_with("v1@") {
        return Err(Error::msg(format!("no migration from {}", from)));
    }
    let mut all = Vec::new();
    let mut scan = COUNTS.scan(b"", b"")?;
    while let Some((k, v)) = scan.next()? {
        all.push((k.to_vec(), v.to_vec()));
    }
    for (k, v) in all {
        let text = String::from_utf8(v).map_err(|_| Error::msg("not text"))?;
        let n: u64 = text
            .trim_start_matches("{\"n\":")
            .trim_end_matches('}')
            .parse()
            .map_err(|_| Error::msg(format!("not a JSON count: {}", text)))?;
        COUNTS.put(&k, &n.to_be_bytes())?;
    }
    Ok(())
}

/// Writes a key, then tries what a migration may not do and fails.
fn forbidden(_: &str) -> Result<()> {
    COUNTS.put(b"half", b"written")?;
    let emit = OUT.emit(&Out::new(None, Some(b"x"))).err().and_then(|e| e.errno());
    let set = timer::set(EVENT_TIME, 5, b"t").err().and_then(|e| e.errno());
    COUNTS.put(b"emit", format!("{:?}", emit).as_bytes())?;
    COUNTS.put(b"timer", format!("{:?}", set).as_bytes())?;
    if emit != Some(Errno::PHASE) || set != Some(Errno::PHASE) {
        return Err(Error::msg(format!("emit {:?}, timer_set {:?}: want PHASE", emit, set)));
    }
    Err(Error::msg("the migration fails"))
}

fn host() -> Host<fn(&Record) -> Result<()>> {
    let mut h: Host<fn(&Record) -> Result<()>> = Host::new(nothing as fn(&Record) -> Result<()>).outputs(&["out"]).stores(&["counts"]);
    h.start().unwrap();
    h
}

#[test]
fn migrates_json_to_binary() {
    let mut h = host();
    h.put("counts", b"a", b"{\"n\":5}");
    h.put("counts", b"b", b"{\"n\":12}");
    let o = h.migrate("v1@0123456789ab", to_binary);
    assert!(o.error.is_none(), "{:?}", o.error);
    assert_eq!(h.get("counts", b"a"), Some(5u64.to_be_bytes().to_vec()));
    assert_eq!(h.get("counts", b"b"), Some(12u64.to_be_bytes().to_vec()));
    let _ = h.process(&Input::kv("a", "x"));
}

#[test]
fn failed_migration_leaves_the_stores() {
    let mut h = host();
    h.put("counts", b"a", b"{\"n\":5}");
    let o = h.migrate("v0@0123456789ab", to_binary);
    assert!(o.error.as_deref().unwrap_or("").contains("no migration from v0@"), "{:?}", o.error);
    let o = h.migrate("v1@0123456789ab", forbidden);
    assert!(o.error.as_deref().unwrap_or("").contains("the migration fails"), "{:?}", o.error);
    assert!(o.emitted.is_empty());
    assert_eq!(h.entries("counts"), vec![(b"a".to_vec(), b"{\"n\":5}".to_vec())]);
}
