//! The SDK against its fake host: every call and the host semantics a
//! processor relies on.

use wasmstream::testing::{Host, Input};
use wasmstream::{abi, Errno, Header, Out, Output, Record, Result, Store};

static OUT: Output = Output::new("out");
static S: Store = Store::new("s");
static NOPE: Output = Output::new("nope");

fn cmd(r: &Record) -> Result<()> {
    match r.value().unwrap_or(b"") {
        b"state" => {
            assert_eq!(S.get(b"k")?, None);
            S.put(b"k", b"")?;
            assert_eq!(S.get(b"k")?, Some(Vec::new())); // empty is a value
            S.put(b"k", b"v1")?;
            assert_eq!(S.get(b"k")?, Some(b"v1".to_vec())); // reads see staged writes
            S.delete(b"k")?;
            S.delete(b"k")?; // a missing key is not an error
            assert_eq!(S.get(b"k")?, None);
            let big = vec![7u8; 5000]; // over the first read buffer
            S.put(b"big", &big)?;
            let mut buf = Vec::new();
            assert!(S.get_into(b"big", &mut buf)?);
            assert_eq!(buf, big);
            OUT.emit(&Out::new(None, Some(b"state ok")))
        }
        b"scan" => {
            for (k, n) in [(&b"a/1"[..], 10usize), (b"a/2", 700), (b"a/3", 70000), (b"b/1", 1)] {
                S.put(k, &vec![b'x'; n])?;
            }
            let mut s = S.scan_prefix(b"a/")?;
            let mut got = String::new();
            while let Some((k, v)) = s.next()? {
                got.push_str(&format!("{}={} ", String::from_utf8_lossy(k), v.len()));
            }
            let mut all = S.scan(b"", b"")?;
            let mut n = 0;
            while all.next()?.is_some() {
                n += 1;
            }
            got.push_str(&n.to_string());
            OUT.emit(&Out::new(None, Some(got.as_bytes())))
        }
        b"limits" => {
            let e = S.put(&vec![0u8; abi::MAX_KEY_SIZE + 1], b"").unwrap_err();
            assert_eq!(e.errno(), Some(Errno::TOOLARGE));
            assert_eq!(e.to_string(), "sdk: state_put \"s\": ETOOLARGE: over the size limit");
            let e = OUT.emit(&Out::new(None, Some(&vec![0u8; abi::MAX_RECORD_SIZE]))).unwrap_err();
            assert_eq!(e.errno(), Some(Errno::TOOLARGE));
            let e = NOPE.emit(&Out::new(None, None)).unwrap_err();
            assert_eq!(e.to_string(), "sdk: output_index \"nope\": ENONAME: no output or store with that name");
            let mut open = Vec::new();
            for _ in 0..abi::MAX_OPEN_CURSORS {
                open.push(S.scan(b"", b"")?);
            }
            assert_eq!(S.scan(b"", b"").err().and_then(|e| e.errno()), Some(Errno::LIMIT));
            drop(open); // closes them
            S.scan(b"", b"")?;
            OUT.emit(&Out::new(None, Some(b"limits ok")))
        }
        b"headers" => {
            let hs = [
                Header { name: b"n", value: None },
                Header { name: b"e", value: Some(b"") },
                Header { name: b"", value: Some(b"v") },
            ];
            OUT.emit_to(2, &Out { key: Some(b""), value: None, headers: &hs, timestamp: 7 })?;
            OUT.emit(&Out::new(r.key(), r.value()))
        }
        b"fail" => {
            S.put(b"written", b"1")?;
            OUT.emit(&Out::new(None, Some(b"lost")))?;
            Err("rejected on purpose".into())
        }
        b"config" => {
            let c = wasmstream::config();
            wasmstream::info("config read");
            OUT.emit(&Out::new(None, Some(format!("{}", c.len()).as_bytes())))
        }
        other => Err(format!("unknown command {:?}", String::from_utf8_lossy(other)).into()),
    }
}

fn init() -> Result<()> {
    OUT.check()?;
    S.check()?;
    // Emits and state are refused during init.
    assert_eq!(OUT.emit(&Out::new(None, None)).unwrap_err().errno(), Some(Errno::PHASE));
    assert_eq!(S.get(b"k").unwrap_err().errno(), Some(Errno::PHASE));
    wasmstream::warn("init ok");
    Ok(())
}

fn host() -> Host<fn(&Record) -> Result<()>> {
    let mut h = Host::new(cmd as fn(&Record) -> Result<()>).outputs(&["out"]).stores(&["s"]).init(init);
    h.start().unwrap();
    h
}

fn value(h: &mut Host<fn(&Record) -> Result<()>>, cmd: &str) -> String {
    let res = h.process(&Input { value: Some(cmd.as_bytes().to_vec()), timestamp: 42, ..Input::default() });
    assert_eq!(res.error, None, "{}", cmd);
    String::from_utf8(res.emitted[0].value.clone().unwrap()).unwrap()
}

#[test]
fn state() {
    let mut h = host();
    assert_eq!(value(&mut h, "state"), "state ok");
    assert_eq!(h.get("s", b"big").map(|v| v.len()), Some(5000));
    assert_eq!(h.logs()[0].msg, "init ok");
}

#[test]
fn scan() {
    let mut h = host();
    assert_eq!(value(&mut h, "scan"), "a/1=10 a/2=700 a/3=70000 4");
}

#[test]
fn limits() {
    let mut h = host();
    assert_eq!(value(&mut h, "limits"), "limits ok");
}

#[test]
fn headers_partitions_null_and_empty() {
    let mut h = host();
    let res = h.process(&Input { key: None, value: Some(b"headers".to_vec()), timestamp: 42, ..Input::default() });
    assert_eq!(res.error, None);
    let e = &res.emitted[0];
    assert_eq!((e.key.clone(), e.value.clone(), e.partition, e.timestamp), (Some(vec![]), None, 2, 7));
    assert_eq!(
        e.headers,
        vec![(b"n".to_vec(), None), (b"e".to_vec(), Some(vec![])), (vec![], Some(b"v".to_vec()))]
    );
    let e = &res.emitted[1];
    assert_eq!((e.key.clone(), e.partition, e.timestamp), (None, abi::ANY_PARTITION, 42));
}

#[test]
fn failed_record_discards_everything() {
    let mut h = host();
    let res = h.process(&Input::kv("k", "fail"));
    assert_eq!(res.status, abi::STATUS_FAILED);
    assert_eq!(res.error.as_deref(), Some("rejected on purpose"));
    assert!(res.emitted.is_empty());
    assert_eq!(h.get("s", b"written"), None);
}

#[test]
fn config_larger_than_the_first_buffer() {
    let cfg = format!("{{\"pad\":\"{}\"}}", "x".repeat(3000));
    let mut h = Host::new(cmd as fn(&Record) -> Result<()>).outputs(&["out"]).stores(&["s"]).config(&cfg);
    assert_eq!(value(&mut h, "config"), cfg.len().to_string());
}

#[test]
fn undeclared_store_fails_init() {
    let mut h = Host::new(cmd as fn(&Record) -> Result<()>).outputs(&["out"]).init(init);
    let e = h.start().unwrap_err();
    assert_eq!(e, "sdk: store_index \"s\": ENONAME: no output or store with that name");
}

#[test]
fn injected_io_error_fails_the_record() {
    let mut h = Host::new(cmd as fn(&Record) -> Result<()>)
        .outputs(&["out"])
        .stores(&["s"])
        .fault(|call| if call == "state_get" { Some(Errno::IO) } else { None });
    let res = h.process(&Input::kv("k", "state"));
    assert_eq!(res.error.as_deref(), Some("host: state_get: EIO: host I/O failure"));
}

// Commit marks (abi/ABI.md 8.2-8.3): a key marked by several records gets
// one commit call, in key order, with the timestamp of its last mark; a
// failed record's marks are dropped; a full window answers ELIMIT; a
// commit call may emit and use state but not mark.
static MARKED: wasmstream::Output = wasmstream::Output::new("out");

fn mark(r: &Record) -> Result<()> {
    let v = r.value().unwrap_or(b"");
    let fresh = wasmstream::commit_mark(r.key().unwrap_or(b""))?;
    MARKED.emit(&Out::new(Some(b"fresh"), Some(if fresh { b"1" } else { b"0" })))?;
    if v == b"fail" {
        return Err("rejected on purpose".into());
    }
    Ok(())
}

fn committed(c: &wasmstream::Commit) -> Result<()> {
    let again = wasmstream::commit_mark(b"x").unwrap_err();
    assert_eq!(again.errno(), Some(Errno::PHASE));
    MARKED.emit(&Out::new(Some(c.key()), Some(b"committed")))
}

#[test]
fn commit_marks() {
    let mut h = Host::new(mark as fn(&Record) -> Result<()>).outputs(&["out"]).on_commit(committed).commit_marks(2);
    let rec = |k: &str, v: &str, ts: i64| Input { timestamp: ts, ..Input::kv(k, v) };
    let fresh = |o: &wasmstream::testing::Outcome| o.emitted[0].value.clone().unwrap();
    assert_eq!(fresh(&h.process(&rec("b", "", 10))), b"1");
    assert_eq!(fresh(&h.process(&rec("b", "", 20))), b"0");
    assert!(h.process(&rec("a", "fail", 30)).error.is_some()); // its mark is dropped
    assert_eq!(fresh(&h.process(&rec("a", "", 40))), b"1");
    let full = h.process(&rec("c", "", 50));
    assert_eq!(full.error.as_deref(), Some("sdk: commit_mark: ELIMIT: per-record limit reached"));
    let calls = h.commit().callbacks;
    let keys: Vec<&[u8]> = calls.iter().map(|c| c.key.as_slice()).collect();
    assert_eq!(keys, [&b"a"[..], &b"b"[..]]);
    for (c, ts) in calls.iter().zip([40, 20]) {
        assert_eq!(c.error, None);
        assert_eq!(c.emitted[0].value.as_deref(), Some(&b"committed"[..]));
        assert_eq!(c.emitted[0].timestamp, ts, "the last mark's timestamp");
    }
    assert!(h.commit().callbacks.is_empty(), "marks are cleared by the commit");
    assert_eq!(fresh(&h.process(&rec("b", "", 60))), b"1", "a new window");
}
