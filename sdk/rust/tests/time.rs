//! Timers, clocks, commit marks and store expiry (abi/ABI.md section 8)
//! against the fake host: the Go SDK's sdk/timer and sdktest tests, in Rust.

use std::cell::RefCell;
use wasmstream::testing::{Host, Input, Outcome, DEFAULT_WALL_TIME};
use wasmstream::timer::{self, Firing, EVENT_TIME, PROCESSING_TIME};
use wasmstream::{abi, Commit, Errno, Out, Output, Record, Result, Store};

static OUT: Output = Output::new("out");
static S: Store = Store::new("s");

type H = Host<fn(&Record) -> Result<()>>;

fn emit(s: &str) -> Result<()> {
    OUT.emit(&Out::new(None, Some(s.as_bytes())))
}

fn values(o: &Outcome) -> Vec<String> {
    o.emitted.iter().map(|e| String::from_utf8_lossy(e.value.as_deref().unwrap_or(b"")).into_owned()).collect()
}

/// A record's value is a list of commands: "set:e:100:k" sets an event-time
/// timer, "set:p:..." a processing-time one, "cancel:..." cancels, "mark:k"
/// marks a key, "now" emits the clocks, "fail" fails the record.
fn commands(r: &Record) -> Result<()> {
    let v = String::from_utf8_lossy(r.value().unwrap_or(b"")).into_owned();
    for c in v.split_whitespace() {
        let f: Vec<&str> = c.split(':').collect();
        match f[0] {
            "set" | "cancel" => {
                let kind = if f[1] == "p" { PROCESSING_TIME } else { EVENT_TIME };
                let ts: i64 = f[2].parse().unwrap();
                let changed =
                    if f[0] == "set" { timer::set(kind, ts, f[3].as_bytes())? } else { timer::cancel(kind, ts, f[3].as_bytes())? };
                emit(&format!("{}={}", c, changed))?;
            }
            "mark" => {
                timer::mark(f[1].as_bytes())?;
            }
            "now" => emit(&format!("now {} {}", timer::stream_time()?, timer::wall_time()?))?,
            "fail" => return Err("failed on purpose".into()),
            _ => {}
        }
    }
    Ok(())
}

fn kind(k: u32) -> &'static str {
    if k == EVENT_TIME {
        "event"
    } else {
        "processing"
    }
}

fn fired_emit(f: &Firing) -> Result<()> {
    emit(&format!("fired {} {} {} stream={}", kind(f.kind()), f.time(), String::from_utf8_lossy(f.key()), f.stream_time()))
}

fn host() -> H {
    Host::new(commands as fn(&Record) -> Result<()>).outputs(&["out"]).stores(&["s"]).on_timer(fired_emit)
}

fn rec(ts: i64, v: &str) -> Input {
    Input { timestamp: ts, value: Some(v.as_bytes().to_vec()), ..Input::default() }
}

fn ok(o: Outcome) -> Outcome {
    if let Some(e) = o.failed() {
        panic!("step failed: {}", e);
    }
    o
}

#[test]
fn set_cancel_and_identity() {
    let mut h = host();
    let res = ok(h.process(&rec(10, "set:e:100:a set:e:100:a set:p:100:a set:e:100:b cancel:e:100:b cancel:e:100:b")));
    assert_eq!(
        values(&res),
        [
            "set:e:100:a=true",
            "set:e:100:a=false",
            "set:p:100:a=true",
            "set:e:100:b=true",
            "cancel:e:100:b=true",
            "cancel:e:100:b=false"
        ]
    );
    let t = h.timers();
    assert_eq!(t.len(), 2);
    assert_eq!((t[0].kind, t[1].kind), (EVENT_TIME, PROCESSING_TIME));
}

// Event-time timers fire after the record that moves the stream time to
// them, in (time, kind, key) order, and see the stream time that includes
// that record; an earlier record does not move it back.
#[test]
fn event_time_fires_after_the_record() {
    let mut h = host();
    ok(h.process(&rec(10, "set:e:100:b set:e:100:a set:e:50:z set:p:10:p")));
    assert_eq!(values(&ok(h.process(&rec(49, "now")))), [format!("now 49 {}", DEFAULT_WALL_TIME)]);
    let res = ok(h.process(&rec(120, "now")));
    assert_eq!(
        values(&res),
        [
            format!("now 120 {}", DEFAULT_WALL_TIME),
            "fired event 50 z stream=120".to_string(),
            "fired event 100 a stream=120".to_string(),
            "fired event 100 b stream=120".to_string()
        ]
    );
    assert_eq!(res.callbacks.len(), 3);
    assert_eq!(res.emitted[1].timestamp, 50, "emits in a callback default to the timer's time");
    let res = ok(h.process(&rec(5, "now")));
    assert_eq!(values(&res), [format!("now 120 {}", DEFAULT_WALL_TIME)]);
    assert_eq!((h.stream_time(), h.timers().len()), (120, 1));
    ok(h.process(&rec(-1, "")));
    assert_eq!(h.stream_time(), 120, "a record without timestamp does not move the stream time");
}

// Processing-time timers fire at commit points only, when the wall clock
// has reached them, even with no records.
#[test]
fn processing_time_fires_at_commit_points() {
    let mut h = host().with_wall_time(1000);
    ok(h.process(&rec(1, "set:p:61000:k set:p:1000:now")));
    assert!(ok(h.process(&rec(2, ""))).callbacks.is_empty(), "fired between records");
    assert_eq!(values(&ok(h.commit())), ["fired processing 1000 now stream=2"]);
    assert!(values(&ok(h.advance_wall_time(59_000))).is_empty());
    let res = ok(h.advance_wall_time(1000));
    assert_eq!(values(&res), ["fired processing 61000 k stream=2"]);
    assert_eq!(res.emitted[0].timestamp, 61000);
    assert!(h.timers().is_empty());
}

thread_local! {
    static N: RefCell<u32> = RefCell::new(0);
    static ERRS: RefCell<Vec<Option<Errno>>> = RefCell::new(Vec::new());
}

fn again(f: &Firing) -> Result<()> {
    let n = N.with(|n| {
        *n.borrow_mut() += 1;
        *n.borrow()
    });
    if n < 3 {
        timer::set(EVENT_TIME, f.time(), format!("again{}", n).as_bytes())?;
    }
    fired_emit(f)
}

// A timer set by a callback that is already due fires at the next check,
// not in the same one.
#[test]
fn timer_set_in_callback_waits_for_next_check() {
    let mut h = host().on_timer(again);
    ok(h.process(&rec(10, "set:e:5:a")));
    assert_eq!((N.with(|n| *n.borrow()), h.timers().len()), (1, 1));
    let res = ok(h.process(&rec(10, "")));
    assert_eq!(res.callbacks.len(), 1);
    assert_eq!(res.callbacks[0].key, b"again1");
    let res = ok(h.commit());
    assert_eq!(res.callbacks.len(), 1);
    assert_eq!(res.callbacks[0].key, b"again2");
}

// At most the firings limit fire per commit window; the rest wait, in order.
#[test]
fn firings_per_commit_limit() {
    let mut h = host().timer_limits(0, 2, 0);
    ok(h.process(&rec(0, "set:e:1:a set:e:2:b set:e:3:c set:e:4:d set:e:5:e")));
    assert_eq!(ok(h.process(&rec(10, ""))).callbacks.len(), 2);
    assert_eq!(ok(h.process(&rec(11, ""))).callbacks.len(), 0);
    assert!(values(&ok(h.commit())).is_empty(), "the commit point of a spent window fired");
    assert_eq!(values(&ok(h.process(&rec(12, "")))), ["fired event 3 c stream=12", "fired event 4 d stream=12"]);
}

#[test]
fn pending_timers_limit() {
    let mut h = host().timer_limits(2, 0, 0);
    let res = h.process(&rec(0, "set:e:10:a set:e:10:a set:e:11:b set:e:12:c"));
    assert_eq!(res.error.as_deref(), Some("sdk: timer_set: ELIMIT: per-record limit reached"));
    // A cancel in the same call frees a place.
    ok(h.process(&rec(0, "set:e:10:a set:e:11:b cancel:e:10:a set:e:12:c")));
    let t = h.timers();
    assert_eq!(t.len(), 2);
    assert_eq!(t[1].key, b"c");
}

fn arg_checks(_: &Record) -> Result<()> {
    let big = vec![0u8; abi::MAX_TIMER_KEY_SIZE + 1];
    let errs = vec![
        timer::set(abi::TRIGGER_COMMIT, 1, b"").err(),
        timer::set(EVENT_TIME, -1, b"").err(),
        timer::set(EVENT_TIME, 1, &big).err(),
        timer::cancel(7, 1, b"").err(),
        timer::mark(&big).err(),
    ];
    assert_eq!(errs[0].as_ref().unwrap().to_string(), "sdk: timer_set: EINVAL: malformed argument");
    ERRS.with(|e| *e.borrow_mut() = errs.iter().map(|e| e.as_ref().and_then(|e| e.errno())).collect());
    Ok(())
}

#[test]
fn timer_arguments_checked() {
    let mut h = Host::new(arg_checks as fn(&Record) -> Result<()>).outputs(&["out"]).stores(&["s"]);
    ok(h.process(&rec(0, "")));
    let want = [Errno::INVAL, Errno::INVAL, Errno::TOOLARGE, Errno::INVAL, Errno::TOOLARGE];
    ERRS.with(|e| assert_eq!(*e.borrow(), want.iter().map(|e| Some(*e)).collect::<Vec<_>>()));
}

fn init_time() -> Result<()> {
    let errs = vec![
        timer::set(EVENT_TIME, 1, b"").err().and_then(|e| e.errno()),
        timer::stream_time().err().and_then(|e| e.errno()),
        timer::mark(b"").err().and_then(|e| e.errno()),
        timer::wall_time().err().and_then(|e| e.errno()),
    ];
    ERRS.with(|e| *e.borrow_mut() = errs);
    Ok(())
}

#[test]
fn time_calls_refused_during_init() {
    let mut h = host().init(init_time);
    h.start().unwrap();
    ERRS.with(|e| assert_eq!(*e.borrow(), vec![Some(Errno::PHASE); 4]));
}

fn failing_timer(f: &Firing) -> Result<()> {
    S.put(f.key(), b"x")?;
    timer::set(EVENT_TIME, 1000, f.key())?;
    emit("lost")?;
    Err("callback says no".into())
}

// A failed callback's emits, state writes and timer changes are discarded,
// and its timer stays removed.
#[test]
fn failed_callback() {
    let mut h = host().on_timer(failing_timer);
    ok(h.process(&rec(0, "set:e:1:err set:e:2:err2")));
    let res = h.process(&rec(5, ""));
    assert_eq!(res.error, None);
    assert_eq!((res.callbacks.len(), res.emitted.len()), (2, 0));
    assert_eq!(res.callbacks[0].error.as_deref(), Some("callback says no"));
    assert_eq!(res.failed().as_deref(), Some("event callback for key \"err\" at 1: callback says no"));
    assert!(h.timers().is_empty());
    assert!(h.entries("s").is_empty());
}

fn commit_emit(c: &Commit) -> Result<()> {
    emit(&format!("commit {}", String::from_utf8_lossy(c.key())))
}

// A failed record's timer changes and marks are discarded, but the record
// still moved the stream time.
#[test]
fn failed_record_discards_timers_and_marks() {
    let mut h = host().on_commit(commit_emit);
    let res = h.process(&rec(40, "set:e:100:a mark:k fail"));
    assert!(res.error.is_some());
    assert!(h.timers().is_empty() && h.marked().is_empty());
    assert_eq!(h.stream_time(), 40);
}

fn mark_timer(f: &Firing) -> Result<()> {
    timer::mark(f.key()).map(|_| ())
}

fn commit_and_mark(c: &Commit) -> Result<()> {
    let e = timer::mark(b"again").err().and_then(|e| e.errno());
    ERRS.with(|x| *x.borrow_mut() = vec![e]);
    emit(&format!("commit {} {}", String::from_utf8_lossy(c.key()), c.timestamp()))
}

// Commit marks: one call per marked key per window, in key order, with the
// timestamp of the call that marked it last; marks made by timers that fire
// at the commit point are included; mark is refused in on_commit.
#[test]
fn commit_marks() {
    let mut h = host().on_timer(mark_timer).on_commit(commit_and_mark).with_wall_time(0);
    ok(h.process(&rec(7, "mark:b mark:a")));
    ok(h.process(&rec(5, "mark:b set:p:0:t")));
    assert_eq!(h.marked(), [b"a".to_vec(), b"b".to_vec()]);
    let res = ok(h.commit());
    assert_eq!(values(&res), ["commit a 7", "commit b 5", "commit t 0"]);
    assert_eq!((res.emitted[0].timestamp, res.emitted[1].timestamp), (7, 5), "the marks' timestamps");
    ERRS.with(|e| assert_eq!(*e.borrow(), vec![Some(Errno::PHASE)]));
    assert!(values(&ok(h.commit())).is_empty(), "a second commit point repeated");
}

fn four_marks(_: &Record) -> Result<()> {
    let errs = ["a", "b", "a", "c"].iter().map(|k| timer::mark(k.as_bytes()).err().and_then(|e| e.errno())).collect();
    ERRS.with(|e| *e.borrow_mut() = errs);
    Ok(())
}

fn no_commit(_: &Commit) -> Result<()> {
    Ok(())
}

#[test]
fn commit_marks_limit() {
    let mut h = Host::new(four_marks as fn(&Record) -> Result<()>).on_commit(no_commit).timer_limits(0, 0, 2);
    ok(h.process(&rec(0, "")));
    ERRS.with(|e| assert_eq!(*e.borrow(), vec![None, None, None, Some(Errno::LIMIT)]));
}

#[test]
fn commit_every() {
    let mut h = host().on_commit(commit_emit).commit_every(2);
    assert!(values(&ok(h.process(&rec(0, "mark:x")))).is_empty());
    assert_eq!(values(&ok(h.process(&rec(0, "mark:x")))), ["commit x"]);
}

#[test]
fn stream_time_option() {
    let mut h = host().with_stream_time(500);
    assert!(values(&ok(h.process(&rec(3, "now"))))[0].starts_with("now 500 "));
}

fn set_largest_key(_: &Record) -> Result<()> {
    timer::set(EVENT_TIME, 1, &vec![0u8; abi::MAX_TIMER_KEY_SIZE]).map(|_| ())
}

fn key_len(f: &Firing) -> Result<()> {
    N.with(|n| *n.borrow_mut() = f.key().len() as u32);
    Ok(())
}

// The largest key makes a trigger larger than the first buffer the host
// asks for (4096 bytes); it must arrive whole.
#[test]
fn largest_key() {
    let mut h = Host::new(set_largest_key as fn(&Record) -> Result<()>).stores(&["s"]).on_timer(key_len);
    ok(h.process(&rec(1, "")));
    N.with(|n| assert_eq!(*n.borrow() as usize, abi::MAX_TIMER_KEY_SIZE));
}

/// A record's value is "put:k", "get:k" or "scan"; what it reads is emitted.
fn ttl_plugin(r: &Record) -> Result<()> {
    let v = String::from_utf8_lossy(r.value().unwrap_or(b"")).into_owned();
    let (cmd, key) = v.split_once(':').unwrap_or((&v, ""));
    match cmd {
        "put" => S.put(key.as_bytes(), b"v"),
        "get" => emit(if S.get(key.as_bytes())?.is_some() { "found" } else { "missing" }),
        "scan" => {
            let mut it = S.scan(b"", b"")?;
            let mut keys = Vec::new();
            while let Some((k, _)) = it.next()? {
                keys.push(String::from_utf8_lossy(k).into_owned());
            }
            emit(&format!("scan {}", keys.join(",")))
        }
        _ => Ok(()),
    }
}

fn step(h: &mut H, ts: i64, cmd: &str) -> String {
    values(&ok(h.process(&rec(ts, cmd)))).pop().unwrap_or_default()
}

// abi/ABI.md section 8.7 on the stream clock: an entry expires at its stamp
// plus the TTL, is unreadable at once, and is deleted at the next commit
// point; a write renews it, a read does not.
#[test]
fn store_ttl_stream_time() {
    let mut h =
        Host::new(ttl_plugin as fn(&Record) -> Result<()>).outputs(&["out"]).stores(&["s"]).ttl("s", 100, abi::CLOCK_STREAM);
    step(&mut h, 1000, "put:a");
    step(&mut h, 1050, "put:b");
    assert_eq!(step(&mut h, 1099, "get:a"), "found");
    assert_eq!(step(&mut h, 1100, "get:a"), "missing");
    assert_eq!(step(&mut h, 1100, "scan"), "scan b");
    assert!(h.get("s", b"a").is_some(), "deleted before a commit point");
    ok(h.commit());
    assert_eq!(h.entries("s").len(), 1);
    step(&mut h, 1120, "put:b"); // renews b until 1220
    assert_eq!(step(&mut h, 1200, "get:b"), "found");
    assert_eq!(step(&mut h, 1000, "get:a"), "missing", "the stream time does not go back");
}

#[test]
fn store_ttl_wall_time() {
    let mut h = Host::new(ttl_plugin as fn(&Record) -> Result<()>)
        .outputs(&["out"])
        .stores(&["s"])
        .with_wall_time(0)
        .ttl("s", 60_000, abi::CLOCK_WALL);
    step(&mut h, 1 << 40, "put:k"); // the record's timestamp does not matter
    h.set_wall_time(59_999);
    assert_eq!(step(&mut h, 0, "get:k"), "found");
    ok(h.advance_wall_time(1));
    assert_eq!(step(&mut h, 0, "get:k"), "missing");
    assert!(h.entries("s").is_empty());
}

static UNDECLARED: Output = Output::new("alerts");
static COUNTS: Store = Store::new("counts");

// handles = [..]: a name the config does not declare fails the start, all
// of them in one message.
#[test]
fn handles_resolved_at_start() {
    let mut h = host().handles(&[&S, &COUNTS, &OUT, &UNDECLARED]);
    assert_eq!(
        h.start().unwrap_err(),
        "sdk: not declared by the processor (add to its outputs or stores in the pipeline config): \
         output \"alerts\", store \"counts\""
    );
    let mut h = host().handles(&[&S, &OUT]);
    h.start().unwrap();
}
