//! The window helpers against the fake host: the Go SDK's sdk/window tests,
//! in Rust, including the out-of-order runs against a reference model.

mod common;

use common::Rng;
use std::cell::RefCell;
use std::collections::BTreeMap;
use wasmstream::testing::{Host, Input, Outcome};
use wasmstream::timer::Firing;
use wasmstream::window::{self, Emit, Spec, WindowResult, Windows};
use wasmstream::{Commit, Output, Record, Result, Store};

static OUT: Output = Output::new("out");
static LATE: Output = Output::new("late");
static STORE: Store = Store::new("w");

thread_local! {
    static W: RefCell<Option<&'static Windows>> = RefCell::new(None);
}

fn w() -> &'static Windows {
    W.with(|w| w.borrow().expect("no windows"))
}

/// Emits each result to "out" as "key start-end count[ final]" (count
/// "retract" for a retraction).
fn result(res: &WindowResult) -> Result<()> {
    let v = match res.agg {
        Some(a) => window::count_of(Some(a))?.to_string(),
        None => "retract".to_string(),
    };
    let mut s = format!("{} {}-{} {}", String::from_utf8_lossy(res.key), res.window.start, res.window.end, v);
    if res.is_final {
        s.push_str(" final");
    }
    OUT.emit(&wasmstream::Out { key: Some(res.key), value: Some(s.as_bytes()), headers: &[], timestamp: res.timestamp })
}

fn add(r: &Record) -> Result<()> {
    if r.value() == Some(b"late?") {
        let n = w().late_count()?;
        return OUT.emit(&wasmstream::Out::new(None, Some(format!("late {}", n).as_bytes())));
    }
    w().add(r)
}

fn fired(f: &Firing) -> Result<()> {
    if !w().on_timer(f)? {
        return Err(format!("a timer that is not the windows': {:?}", f.key()).into());
    }
    Ok(())
}

fn committed(c: &Commit) -> Result<()> {
    if !w().on_commit(c)? {
        return Err(format!("a mark that is not the windows': {:?}", c.key()).into());
    }
    Ok(())
}

type H = Host<fn(&Record) -> Result<()>>;

/// A spec counting into STORE with `result`, named "t".
fn spec() -> Spec {
    Spec::new("t", &STORE, window::count, result)
}

fn start(mut s: Spec, opts: impl FnOnce(H) -> H) -> H {
    if s.gap > 0 {
        s.merge = Some(window::merge_counts);
    }
    let ws: &'static Windows = Box::leak(Box::new(Windows::new(s)));
    ws.check().unwrap();
    W.with(|w| *w.borrow_mut() = Some(ws));
    let h = Host::new(add as fn(&Record) -> Result<()>)
        .outputs(&["out", "late"])
        .stores(&["w"])
        .on_timer(fired)
        .on_commit(committed);
    let mut h = opts(h);
    h.start().unwrap();
    h
}

fn rec(key: &str, ts: i64) -> Input {
    Input { timestamp: ts, ..Input::kv(key, "v") }
}

fn outs(o: &Outcome) -> Vec<String> {
    o.to("out").iter().map(|e| String::from_utf8_lossy(e.value.as_deref().unwrap()).into_owned()).collect()
}

fn expect(what: &str, o: Outcome, want: &[&str]) {
    if let Some(e) = o.failed() {
        panic!("{}: {}", what, e);
    }
    assert_eq!(outs(&o), want, "{}", what);
}

/// The late count, read by a record whose value is "late?".
fn late_count(h: &mut H) -> u64 {
    let o = h.process(&Input { value: Some(b"late?".to_vec()), ..Input::default() });
    let v = outs(&o);
    v[0].strip_prefix("late ").unwrap().parse().unwrap()
}

#[test]
fn tumbling_emit_final() {
    let mut h = start(Spec { size: 10, grace: 5, ..spec() }, |h| h);
    expect("a@1", h.process(&rec("a", 1)), &[]);
    expect("b@3", h.process(&rec("b", 3)), &[]);
    expect("a@9", h.process(&rec("a", 9)), &[]);
    expect("a@12: [0,10) is open until stream time 15", h.process(&rec("a", 12)), &[]);
    expect("a@7 out of order, within grace", h.process(&rec("a", 7)), &[]);
    let res = h.process(&rec("c", 15));
    assert_eq!(res.to("out")[0].timestamp, 9, "the largest record timestamp");
    expect("c@15 closes [0,10)", res, &["a 0-10 3 final", "b 0-10 1 final"]);
    expect("a@8 is late", h.process(&rec("a", 8)), &[]);
    expect("c@100 closes [10,20)", h.process(&rec("c", 100)), &["a 10-20 1 final", "c 10-20 1 final"]);
    assert_eq!(h.entries("w").len(), 2, "c's window [100,110) and the late count");
}

#[test]
fn late_records_counted_and_routed() {
    let mut h = start(Spec { size: 10, late_output: Some(&LATE), ..spec() }, |h| h);
    h.process(&rec("a", 25));
    let res = h.process(&Input {
        key: Some(b"a".to_vec()),
        value: Some(b"old".to_vec()),
        timestamp: 9,
        headers: vec![(b"h".to_vec(), Some(b"1".to_vec()))],
        ..Input::default()
    });
    let l = res.to("late");
    assert_eq!(l.len(), 1);
    assert_eq!((l[0].value.as_deref(), l[0].timestamp), (Some(&b"old"[..]), 9));
    assert_eq!(l[0].headers, vec![(b"h".to_vec(), Some(b"1".to_vec())), (window::LATE_HEADER.as_bytes().to_vec(), Some(b"t".to_vec()))]);
    h.process(&Input { key: Some(b"a".to_vec()), timestamp: -1, ..Input::default() }); // no timestamp: late too
    assert_eq!(late_count(&mut h), 2);
}

#[test]
fn hopping() {
    let mut h = start(Spec { size: 10, advance: 5, emit: Emit::Update, ..spec() }, |h| h);
    expect("a@7", h.process(&rec("a", 7)), &["a 0-10 1", "a 5-15 1"]);
    expect("a@12", h.process(&rec("a", 12)), &["a 5-15 2", "a 10-20 1"]);
    expect("a@3 fits no open window: late", h.process(&rec("a", 3)), &[]);
    expect("a@6 misses [0,10) but fits [5,15)", h.process(&rec("a", 6)), &["a 5-15 3"]);
    expect("b@2 is late", h.process(&rec("b", 2)), &[]);
}

#[test]
fn hopping_first_windows_start_at_zero() {
    let mut h = start(Spec { size: 10, advance: 5, emit: Emit::Update, ..spec() }, |h| h);
    expect("a@2", h.process(&rec("a", 2)), &["a 0-10 1"]);
}

#[test]
fn emit_on_commit() {
    let mut h = start(Spec { size: 10, emit: Emit::OnCommit, ..spec() }, |h| h);
    for ts in [1, 2, 3] {
        expect("a", h.process(&rec("a", ts)), &[]);
    }
    h.process(&rec("b", 4));
    expect("commit 1", h.commit(), &["a 0-10 3", "b 0-10 1"]);
    expect("commit 2: nothing changed", h.commit(), &[]);
    h.process(&rec("a", 5));
    expect("close", h.process(&rec("c", 10)), &["a 0-10 4 final"]);
    expect("commit 3", h.commit(), &["c 10-20 1"]);
    expect("close c", h.process(&rec("c", 25)), &[]);
}

#[test]
fn emit_on_commit_over_mark_limit() {
    let mut h = start(Spec { size: 10, emit: Emit::OnCommit, ..spec() }, |h| h.timer_limits(0, 0, 1));
    expect("a", h.process(&rec("a", 1)), &[]);
    expect("b over the limit", h.process(&rec("b", 1)), &["b 0-10 1"]);
    expect("commit", h.commit(), &["a 0-10 1"]);
}

#[test]
fn sessions() {
    let mut h = start(Spec { gap: 10, grace: 20, ..spec() }, |h| h);
    for (k, ts) in [("a", 100), ("a", 105), ("a", 125), ("a", 115), ("b", 120)] {
        expect("setup", h.process(&rec(k, ts)), &[]);
    }
    expect("nothing closed yet", h.process(&rec("z", 150)), &[]);
    expect("b closes", h.process(&rec("z", 151)), &["b 120-121 1 final"]);
    expect("a closes", h.process(&rec("z", 156)), &["a 100-126 4 final"]);
    expect("z closes", h.process(&rec("y", 300)), &["z 150-157 3 final"]);
}

#[test]
fn sessions_emit_update_retracts_merged() {
    let mut h = start(Spec { gap: 10, grace: 50, emit: Emit::Update, ..spec() }, |h| h);
    expect("1", h.process(&rec("a", 100)), &["a 100-101 1"]);
    expect("2", h.process(&rec("a", 120)), &["a 120-121 1"]);
    expect("bridge", h.process(&rec("a", 110)), &["a 120-121 retract", "a 100-121 3"]);
    expect("earlier", h.process(&rec("a", 95)), &["a 100-121 retract", "a 95-121 4"]);
    expect("inside", h.process(&rec("a", 115)), &["a 95-121 5"]);
    assert_eq!(h.entries("w").len(), 1);
}

#[test]
fn session_late() {
    let mut h = start(Spec { gap: 10, grace: 5, ..spec() }, |h| h);
    h.process(&rec("a", 100));
    h.process(&rec("b", 200));
    h.process(&rec("a", 95)); // would merge into a's closed session: late
    h.process(&rec("b", 186)); // joins b's open session
    assert_eq!(late_count(&mut h), 1);
}

#[test]
fn sessions_emit_on_commit() {
    let mut h = start(Spec { gap: 10, grace: 100, emit: Emit::OnCommit, ..spec() }, |h| h);
    expect("a@100", h.process(&rec("a", 100)), &[]);
    expect("commit 1", h.commit(), &["a 100-101 1"]);
    expect("a@120", h.process(&rec("a", 120)), &[]);
    expect("a@140", h.process(&rec("a", 140)), &[]);
    expect("commit 2", h.commit(), &["a 120-121 1", "a 140-141 1"]);
    expect("a@160 not yet emitted", h.process(&rec("a", 160)), &[]);
    expect("bridge 120-140", h.process(&rec("a", 130)), &["a 140-141 retract"]);
    expect("bridge to 160", h.process(&rec("a", 150)), &[]);
    expect("commit 3", h.commit(), &["a 120-161 5"]);
    expect("close", h.process(&rec("z", 1000)), &[]);
    assert_eq!(h.entries("w").len(), 1, "z's session only");
}

fn noop_result(_: &WindowResult) -> Result<()> {
    Ok(())
}

#[test]
fn check_spec() {
    let base = Spec::new("a", &STORE, window::count, noop_result);
    for (s, want) in [
        (Spec { name: "", size: 1, ..base }, "name is required"),
        (Spec { name: "a\0", size: 1, ..base }, "zero byte"),
        (Spec { ..base }, "exactly one of size"),
        (Spec { size: 1, gap: 1, ..base }, "exactly one of size"),
        (Spec { size: 10, advance: 11, ..base }, "advance must be in (0, size]"),
        (Spec { gap: 10, ..base }, "merge is required"),
        (Spec { size: 10, grace: -1, ..base }, "grace"),
    ] {
        let e = Windows::new(s).check().unwrap_err().to_string();
        assert!(e.contains(want), "{}: want {}", e, want);
    }
}

static X: Windows = Windows::new(Spec { name: "x", size: 10, ..Spec::new("x", &STORE, window::count, noop_result) });
const OTHER_KEYS: [&[u8]; 5] = [b"", b"x", b"y\0w", b"x\0w\0\0\0\x09short", b"x\0q\0\0\0\0\0\0\0\0\0\0\0\0"];

fn set_others(_: &Record) -> Result<()> {
    for k in OTHER_KEYS {
        wasmstream::timer::set(wasmstream::timer::EVENT_TIME, 0, k)?;
        wasmstream::timer::mark(k)?;
    }
    Ok(())
}

fn other_timer(f: &Firing) -> Result<()> {
    let taken = X.on_timer(f)?;
    OUT.emit(&wasmstream::Out::new(None, Some(format!("timer {}", taken).as_bytes())))
}

fn other_commit(c: &Commit) -> Result<()> {
    let taken = X.on_commit(c)?;
    OUT.emit(&wasmstream::Out::new(None, Some(format!("commit {}", taken).as_bytes())))
}

// Timers and marks of another Windows or of the processor are not taken.
#[test]
fn on_timer_ignores_other_keys() {
    let mut h = Host::new(set_others as fn(&Record) -> Result<()>)
        .outputs(&["out"])
        .stores(&["w"])
        .on_timer(other_timer)
        .on_commit(other_commit);
    let mut got = outs(&h.process(&rec("k", 1)));
    got.extend(outs(&h.commit()));
    let want: Vec<String> = ["timer false"; 5].iter().chain(["commit false"; 5].iter()).map(|s| s.to_string()).collect();
    assert_eq!(got, want);
}

#[test]
fn count() {
    assert_eq!(window::count_of(Some(&2u64.to_be_bytes())).unwrap(), 2);
    assert_eq!(window::count_of(None).unwrap(), 0);
    let m = window::merge_counts(&2u64.to_be_bytes(), &5u64.to_be_bytes()).unwrap();
    assert_eq!(window::count_of(Some(&m)).unwrap(), 7);
    assert!(window::count_of(Some(&[1])).is_err());
    assert!(window::count_of(Some(&[])).is_err());
}


// Out-of-order input against a reference computed independently: every
// window that received a record is emitted exactly once, after it closed,
// with the count of the records that came before the stream time passed
// its end plus grace; every other record is late.
#[test]
fn random_out_of_order_against_reference() {
    for (size, adv, grace) in [(100i64, 100i64, 0i64), (100, 100, 30), (100, 25, 40), (60, 40, 10)] {
        let mut rng = Rng((size * 1000 + adv * 10 + grace) as u64);
        let mut h = start(Spec { size, advance: adv, grace, ..spec() }, |h| h.commit_every(7));
        let mut want: BTreeMap<(String, i64), u64> = BTreeMap::new();
        let mut stream = -1i64;
        let mut late_want = 0;
        let mut got = Vec::new();
        for i in 0..2000i64 {
            let ts = (i * 3 + rng.below(240) - 120).max(0);
            let key = format!("k{}", rng.below(5));
            stream = stream.max(ts);
            let mut applied = false;
            let mut s = (ts - size + adv).max(0) / adv * adv;
            while s <= ts {
                if s + size + grace > stream {
                    *want.entry((key.clone(), s)).or_default() += 1;
                    applied = true;
                }
                s += adv;
            }
            if !applied {
                late_want += 1;
            }
            let o = h.process(&rec(&key, ts));
            assert_eq!(o.failed(), None);
            got.extend(outs(&o));
        }
        let o = h.process(&rec("end", 1 << 40));
        got.extend(outs(&o));
        got.extend(outs(&h.commit()));
        let mut seen: BTreeMap<(String, i64), u64> = BTreeMap::new();
        for g in &got {
            let f: Vec<&str> = g.split(' ').collect();
            assert!(f.len() == 4 && f[3] == "final", "result {:?}", g);
            if f[0] == "end" {
                continue;
            }
            let s: i64 = f[1].split('-').next().unwrap().parse().unwrap();
            let k = (f[0].to_string(), s);
            assert!(!seen.contains_key(&k), "window {:?} emitted twice", k);
            seen.insert(k, f[2].parse().unwrap());
        }
        assert_eq!(seen, want, "size {} advance {} grace {}", size, adv, grace);
        assert!(late_want > 0);
        assert_eq!(late_count(&mut h), late_want);
    }
}

// Sessions on out-of-order input against a reference model.
#[test]
fn random_sessions_against_reference() {
    const GAP: i64 = 20;
    const GRACE: i64 = 15;
    let mut rng = Rng(711);
    let mut h = start(Spec { gap: GAP, grace: GRACE, ..spec() }, |h| h.commit_every(5));
    #[derive(Clone, Copy)]
    struct S {
        start: i64,
        end: i64,
        n: i64,
    }
    let mut open: BTreeMap<String, Vec<S>> = BTreeMap::new();
    let (mut want, mut got) = (Vec::new(), Vec::new());
    let mut stream = -1i64;
    let mut late_want = 0;
    for i in 0..3000i64 {
        let mut ts = (i * 2 + rng.below(80) - 40).max(0);
        if rng.below(10) == 0 {
            ts += 60;
        }
        let key = format!("k{}", rng.below(4));
        stream = stream.max(ts);
        let mut s = S { start: ts, end: ts + 1, n: 1 };
        let mut keep = Vec::new();
        for o in open.get(&key).cloned().unwrap_or_default() {
            if ts >= o.start - GAP && ts <= o.end - 1 + GAP {
                s = S { start: s.start.min(o.start), end: s.end.max(o.end), n: s.n + o.n };
            } else {
                keep.push(o);
            }
        }
        if s.end + GAP + GRACE <= stream {
            late_want += 1;
        } else {
            keep.push(s);
            open.insert(key.clone(), keep);
        }
        for (k, ss) in open.iter_mut() {
            ss.retain(|o| {
                if o.end + GAP + GRACE <= stream {
                    want.push(format!("{} {}-{} {} final", k, o.start, o.end, o.n));
                    false
                } else {
                    true
                }
            });
        }
        let o = h.process(&rec(&key, ts));
        assert_eq!(o.failed(), None);
        got.extend(outs(&o));
    }
    want.sort();
    got.sort();
    assert!(want.len() >= 100);
    assert_eq!(got, want);
    assert!(late_want > 0);
    assert_eq!(late_count(&mut h), late_want);
}
