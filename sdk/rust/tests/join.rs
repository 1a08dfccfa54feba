//! The join helpers against the fake host: the Go SDK's sdk/join tests, in
//! Rust, including the out-of-order runs against a brute-force join.

mod common;

use common::Rng;
use std::cell::RefCell;
use wasmstream::join::{Join, JoinResult, Kind, Side, Spec};
use wasmstream::testing::{Host, Input, Outcome};
use wasmstream::timer::Firing;
use wasmstream::{Out, Output, Record, Result, Store};

static OUT: Output = Output::new("out");
static LATE: Output = Output::new("late");
static STORE: Store = Store::new("j");

const LEFT: u32 = 0;
const RIGHT: u32 = 1;

thread_local! {
    static J: RefCell<Option<&'static Join>> = RefCell::new(None);
    static OFFSET: RefCell<i64> = RefCell::new(0);
}

fn j() -> &'static Join {
    J.with(|j| j.borrow().expect("no join"))
}

fn side(s: &Option<Side>) -> String {
    match s {
        None => "-".into(),
        Some(s) => format!("{}@{}", s.value.map_or("null".into(), |v| String::from_utf8_lossy(v).into_owned()), s.timestamp),
    }
}

/// Emits "key left|right", a side being "value@ts" or "-".
fn result(res: &JoinResult) -> Result<()> {
    let s = format!("{} {}|{}", String::from_utf8_lossy(res.key), side(&res.left), side(&res.right));
    OUT.emit(&Out { key: Some(res.key), value: Some(s.as_bytes()), headers: &[], timestamp: res.timestamp })
}

fn add(r: &Record) -> Result<()> {
    if r.value() == Some(b"late?") {
        let n = j().late_count()?;
        return OUT.emit(&Out::new(None, Some(format!("late {}", n).as_bytes())));
    }
    j().add(r)
}

fn fired(f: &Firing) -> Result<()> {
    if !j().on_timer(f)? {
        return Err("a timer that is not the join's".into());
    }
    Ok(())
}

type H = Host<fn(&Record) -> Result<()>>;

fn spec() -> Spec {
    Spec::new("j", &STORE, result)
}

fn start(s: Spec) -> H {
    let js: &'static Join = Box::leak(Box::new(Join::new(s)));
    js.check().unwrap();
    J.with(|j| *j.borrow_mut() = Some(js));
    let mut h = Host::new(add as fn(&Record) -> Result<()>).outputs(&["out", "late"]).stores(&["j"]).on_timer(fired);
    h.start().unwrap();
    h
}

fn rec(input: u32, key: &str, value: &str, ts: i64) -> Input {
    let offset = OFFSET.with(|o| {
        *o.borrow_mut() += 1;
        *o.borrow()
    });
    Input { input, timestamp: ts, offset, ..Input::kv(key, value) }
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

#[test]
fn inner() {
    let mut h = start(Spec { before: 10, after: 20, grace: 5, ..spec() });
    expect("l1@100", h.process(&rec(LEFT, "a", "l1", 100)), &[]);
    expect("r1@95 joins l1", h.process(&rec(RIGHT, "a", "r1", 95)), &["a l1@100|r1@95"]);
    expect("r2@120 joins l1 (t+after)", h.process(&rec(RIGHT, "a", "r2", 120)), &["a l1@100|r2@120"]);
    expect("r3@121 is past l1+after", h.process(&rec(RIGHT, "a", "r3", 121)), &[]);
    expect("other key", h.process(&rec(RIGHT, "b", "rb", 118)), &[]);
    let res = h.process(&rec(LEFT, "a", "l2", 119));
    assert_eq!(res.to("out")[1].timestamp, 121, "the larger timestamp");
    expect("l2@119 joins r2, r3 in timestamp order", res, &["a l2@119|r2@120", "a l2@119|r3@121"]);
}

#[test]
fn left_emits_unmatched_once_window_passed() {
    let mut h = start(Spec { after: 10, grace: 5, kind: Kind::Left, ..spec() });
    expect("l@100", h.process(&rec(LEFT, "a", "l", 100)), &[]);
    expect("m@100", h.process(&rec(LEFT, "b", "m", 100)), &[]);
    expect("r@108 matches l", h.process(&rec(RIGHT, "a", "r", 108)), &["a l@100|r@108"]);
    expect("stream 115", h.process(&rec(RIGHT, "z", "x", 115)), &[]);
    expect("stream 116 expires l and m", h.process(&rec(RIGHT, "z", "x", 116)), &["b m@100|-"]);
    expect("late for m", h.process(&rec(RIGHT, "b", "r", 110)), &[]);
}

#[test]
fn outer() {
    let mut h = start(Spec { before: 5, after: 5, kind: Kind::Outer, ..spec() });
    let null = Input { key: Some(b"a".to_vec()), timestamp: 10, input: RIGHT, offset: 1, ..Input::default() };
    expect("r@10", h.process(&null), &[]);
    expect("l@50 expires r", h.process(&rec(LEFT, "b", "l", 50)), &["a -|null@10"]);
    expect("l@100 expires l@50", h.process(&rec(LEFT, "c", "l", 100)), &["b l@50|-"]);
}

// An empty value is a value, not null, whichever side is buffered.
#[test]
fn empty_is_not_null() {
    let mut h = start(Spec { before: 5, after: 5, kind: Kind::Outer, ..spec() });
    expect("l@10 empty", h.process(&rec(LEFT, "a", "", 10)), &[]);
    expect("r@12 joins", h.process(&rec(RIGHT, "a", "r", 12)), &["a @10|r@12"]);
    expect("r@40 empty", h.process(&rec(RIGHT, "b", "", 40)), &[]);
    expect("l@41 joins", h.process(&rec(LEFT, "b", "l", 41)), &["b l@41|@40"]);
}

#[test]
fn late_counted_and_routed() {
    let mut h = start(Spec { before: 10, after: 10, grace: 5, late_output: Some(&LATE), ..spec() });
    h.process(&rec(LEFT, "a", "l", 100));
    let res = h.process(&rec(RIGHT, "a", "old", 94));
    assert!(res.to("out").is_empty(), "a late record joined");
    let l = res.to("late");
    assert_eq!((l.len(), l[0].value.as_deref(), l[0].timestamp), (1, Some(&b"old"[..]), 94));
    assert_eq!(l[0].headers.last().unwrap().0, wasmstream::join::LATE_HEADER.as_bytes());
    h.process(&Input { key: Some(b"a".to_vec()), timestamp: -1, input: LEFT, ..Input::default() });
    let o = h.process(&Input { value: Some(b"late?".to_vec()), ..Input::default() });
    assert_eq!(outs(&o), ["late 2"]);
}

#[test]
fn buffer_is_deleted_when_window_passes() {
    let mut h = start(Spec { before: 10, after: 10, grace: 5, ..spec() });
    for i in 0..50 {
        assert_eq!(h.process(&rec((i % 2) as u32, &format!("k{}", i % 7), "v", 1000 + i)).failed(), None);
    }
    h.process(&rec(LEFT, "end", "v", 10_000));
    assert_eq!(h.entries("j").len(), 1, "the last record's own buffer entry");
    assert_eq!(h.timers().len(), 1);
}

#[test]
fn other_input_fails() {
    let mut h = start(Spec { after: 1, ..spec() });
    let res = h.process(&rec(2, "a", "v", 1));
    assert!(res.error.unwrap().contains("input 2"));
}

#[test]
fn check_spec() {
    for s in [
        Spec { name: "", ..spec() },
        Spec { name: "a\0", ..spec() },
        Spec { right: 0, ..spec() },
        Spec { after: -1, ..spec() },
    ] {
        assert!(Join::new(s).check().is_err());
    }
    Join::new(spec()).check().unwrap();
}


// Random out-of-order streams of both sides against a brute-force join of
// the records that were not late: every pair once, every unmatched record
// of a left or outer join once, nothing else.
#[test]
fn random_out_of_order_against_reference() {
    for kind in [Kind::Inner, Kind::Left, Kind::Outer] {
        for seed in 0..6u64 {
            let mut rng = Rng(seed * 31 + 7);
            let (before, after, grace) = (rng.below(30), rng.below(30), rng.below(20));
            let mut h = start(Spec { before, after, grace, kind, ..spec() });
            struct In {
                input: u32,
                key: String,
                val: String,
                ts: i64,
            }
            let mut accepted: Vec<In> = Vec::new();
            let mut got = Vec::new();
            let mut stream = -1i64;
            let mut base = 1000i64;
            for i in 0..400 {
                base += rng.below(4);
                let r = In {
                    input: rng.below(2) as u32,
                    key: format!("k{}", rng.below(5)),
                    val: format!("v{}", i),
                    ts: base - rng.below(grace + 15),
                };
                stream = stream.max(r.ts);
                let o = h.process(&rec(r.input, &r.key, &r.val, r.ts));
                assert_eq!(o.failed(), None);
                got.extend(outs(&o));
                if r.ts >= stream - grace {
                    accepted.push(r);
                }
            }
            got.extend(outs(&h.process(&rec(LEFT, "end", "x", base + 1_000_000))));
            let mut want = Vec::new();
            let mut matched = vec![false; accepted.len()];
            for (a, l) in accepted.iter().enumerate() {
                if l.input != LEFT {
                    continue;
                }
                for (b, r) in accepted.iter().enumerate() {
                    if r.input == RIGHT && r.key == l.key && r.ts >= l.ts - before && r.ts <= l.ts + after {
                        want.push(format!("{} {}@{}|{}@{}", l.key, l.val, l.ts, r.val, r.ts));
                        matched[a] = true;
                        matched[b] = true;
                    }
                }
            }
            for (i, r) in accepted.iter().enumerate() {
                if matched[i] {
                    continue;
                }
                if r.input == LEFT && kind != Kind::Inner {
                    want.push(format!("{} {}@{}|-", r.key, r.val, r.ts));
                } else if r.input == RIGHT && kind == Kind::Outer {
                    want.push(format!("{} -|{}@{}", r.key, r.val, r.ts));
                }
            }
            want.sort();
            got.sort();
            assert_eq!(got, want, "{:?} seed {}", kind, seed);
        }
    }
}
