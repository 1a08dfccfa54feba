//! Batches (abi/ABI.md section 10): the same records through the SDK's
//! wasmstream_batch and one at a time through wasmstream_process give the
//! same outcome, record by record, and the same state: emits staged in the
//! arena (the input record forwarded in place, then copied when more
//! follow), a failed record's emits and writes dropped, a batch cut where
//! a timer comes due, a batch returned early when the arena passes its
//! hand-over size while earlier calls' runs stay where they were.

mod common;

use common::Rng;
use wasmstream::testing::{Host, Input, Outcome};
use wasmstream::timer::{self, Firing};
use wasmstream::{abi, Errno, Error, Out, Output, Record, Result, Store};

static OUT: Output = Output::new("out");
static SIDE: Output = Output::new("side");
static KV: Store = Store::new("kv");

/// The processor: the command is the key's text before a colon, its
/// argument the number after it.
fn process(r: &Record) -> Result<()> {
    let key = String::from_utf8_lossy(r.key().unwrap_or(b"")).into_owned();
    let (cmd, arg) = match key.split_once(':') {
        Some((c, a)) => (c.to_string(), a.parse::<i64>().unwrap_or(0)),
        None => (key.clone(), 0),
    };
    match cmd.as_str() {
        "fwd" => OUT.forward(r),
        "fwd2" => {
            OUT.forward(r)?;
            SIDE.forward(r)
        }
        "emit-fwd" => {
            SIDE.emit(&Out::new(Some(b"before"), r.value()))?;
            OUT.forward(r)
        }
        "fwd-emit" => {
            OUT.forward(r)?;
            SIDE.emit(&Out { key: Some(b"after"), value: r.value(), headers: &[], timestamp: 7 })?;
            OUT.forward(r)
        }
        "count" => {
            let n = KV.get(b"count")?.map_or(0, |v| String::from_utf8_lossy(&v).parse::<u64>().unwrap_or(0)) + 1;
            KV.put(b"count", n.to_string().as_bytes())?;
            SIDE.emit(&Out::new(Some(b"count"), Some(n.to_string().as_bytes())))
        }
        "fail" => {
            KV.put(b"failed", b"x")?;
            OUT.forward(r)?;
            SIDE.emit(&Out::new(Some(b"lost"), None))?;
            Err(Error::msg("batch: rejected on purpose"))
        }
        "big" => {
            // arg records of 100,000 bytes each: past the arena's hand-over
            // size (1 MiB) the batch returns early.
            let v: Vec<u8> = (0..100_000u32).map(|i| (i as i64 * 7 + arg) as u8).collect();
            for i in 0..arg {
                OUT.emit(&Out::new(Some(format!("big{}", i).as_bytes()), Some(&v)))?;
            }
            Ok(())
        }
        "huge" => {
            let e = OUT.emit(&Out::new(None, Some(&vec![0u8; abi::MAX_RECORD_SIZE])));
            SIDE.emit(&Out::new(Some(b"huge"), Some(e.err().and_then(|e| e.errno()).map_or("ok", |e| e.name()).as_bytes())))
        }
        "hugefwd" => {
            let e = OUT.forward(r);
            SIDE.emit(&Out::new(Some(b"hugefwd"), Some(e.err().and_then(|e| e.errno()).map_or("ok", |e| e.name()).as_bytes())))
        }
        "timer" => {
            timer::set(timer::EVENT_TIME, arg, key.as_bytes())?;
            OUT.forward(r)
        }
        "now" => {
            let s = timer::stream_time()?;
            SIDE.emit(&Out::new(Some(b"now"), Some(s.to_string().as_bytes())))
        }
        _ => Err(Error::msg(format!("batch: unknown command {:?}", key))),
    }
}

fn fired(f: &Firing) -> Result<()> {
    KV.put(f.key(), b"fired")?;
    SIDE.emit(&Out::new(Some(f.key()), Some(f.stream_time().to_string().as_bytes())))
}

fn host() -> Host<fn(&Record) -> Result<()>> {
    Host::new(process as fn(&Record) -> Result<()>)
        .outputs(&["out", "side"])
        .stores(&["kv"])
        .handles(&[&OUT, &SIDE, &KV])
        .on_timer(fired)
}

fn rec(key: &str, value: &[u8], ts: i64) -> Input {
    Input {
        key: Some(key.as_bytes().to_vec()),
        value: Some(value.to_vec()),
        headers: vec![(b"h".to_vec(), Some(b"1".to_vec())), (b"null".to_vec(), None)],
        timestamp: ts,
        partition: 3,
        offset: ts,
        input: 0,
    }
}

/// Runs recs one at a time and in batches (in chunks of `chunk`) and
/// requires the same outcomes and the same final state.
fn same(name: &str, recs: &[Input], chunk: usize, commit_every: usize) {
    let mut one = host().commit_every(commit_every);
    let want: Vec<Outcome> = recs.iter().map(|r| one.process(r)).collect();
    let mut many = host().commit_every(commit_every);
    let mut got = Vec::new();
    for c in recs.chunks(chunk) {
        got.extend(many.process_batch(c));
    }
    assert_eq!(got.len(), want.len(), "{}: outcomes", name);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "{}: record {} ({:?})", name, i, recs[i].key);
    }
    assert_eq!(many.entries("kv"), one.entries("kv"), "{}: state", name);
    assert_eq!(many.timers(), one.timers(), "{}: timers", name);
    assert_eq!(many.stream_time(), one.stream_time(), "{}: stream time", name);
}

#[test]
fn every_emit_path_like_one_at_a_time() {
    let recs = vec![
        rec("fwd", b"v1", 1),
        rec("fwd2", b"v2", 2),
        rec("emit-fwd", b"v3", 3),
        rec("fwd-emit", b"v4", 4),
        rec("count", b"", 5),
        rec("fail", b"v6", 6),
        rec("count", b"", 7),
        rec("huge", b"", 8),
        rec("hugefwd", &vec![b'x'; abi::MAX_RECORD_SIZE], 9),
        rec("fwd", b"", 10),
        rec("now", b"", 11),
        rec("unknown", b"", 12),
        rec("fwd", b"last", 13),
    ];
    same("emit paths", &recs, recs.len(), 0);
    // The outcomes themselves: the failed record left nothing.
    let out = host().process_batch(&recs);
    assert_eq!(out[5].error.as_deref(), Some("batch: rejected on purpose"));
    assert!(out[5].emitted.is_empty());
    assert_eq!(out[7].emitted[0].value.as_deref(), Some(Errno::TOOLARGE.name().as_bytes()));
    assert_eq!(out[8].emitted[0].value.as_deref(), Some(Errno::TOOLARGE.name().as_bytes()));
    assert_eq!(out[3].emitted.len(), 3);
}

#[test]
fn timers_cut_the_batch() {
    let recs = vec![
        rec("timer:5", b"", 1),
        rec("count", b"", 2),
        rec("now", b"", 6), // the timer fires after this one
        rec("count", b"", 7),
        rec("timer:7", b"", 7), // due at once: fires after it
        rec("now", b"", 8),
        rec("count", b"", 9),
    ];
    same("timers", &recs, recs.len(), 0);
    same("commit every 3", &recs, recs.len(), 3);
    let out = host().process_batch(&recs);
    assert_eq!(out[2].callbacks.len(), 1, "{:?}", out[2]);
    assert_eq!(out[4].callbacks.len(), 1, "{:?}", out[4]);
}

#[test]
fn arena_hand_over_and_growth() {
    // 6 x 100 KB, then 6 x 100 KB: the second call grows the arena (a new
    // chunk) while the first call's run, not yet read, stays in the old
    // one; then 12 x 100 KB passes the hand-over size, and the SDK
    // returns before the records after it.
    let recs = vec![
        rec("big:6", b"", 1),
        rec("big:6", b"", 2),
        rec("fwd", b"a", 3),
        rec("big:12", b"", 4),
        rec("fwd2", b"b", 5),
        rec("big:1", b"", 6),
        rec("count", b"", 7),
    ];
    same("arena", &recs, recs.len(), 0);
}

#[test]
fn random_runs_like_one_at_a_time() {
    let cmds = ["fwd", "fwd2", "emit-fwd", "fwd-emit", "count", "fail", "now", "big:3", "timer:0"];
    let mut rng = Rng(42);
    for run in 0..20 {
        let mut recs = Vec::new();
        let mut ts = 0;
        for _ in 0..40 {
            ts += rng.below(3);
            let mut cmd = cmds[rng.below(cmds.len() as i64) as usize].to_string();
            if cmd == "timer:0" {
                cmd = format!("timer:{}", ts + rng.below(5));
            }
            let v: Vec<u8> = (0..rng.below(200)).map(|_| rng.below(256) as u8).collect();
            recs.push(rec(&cmd, &v, ts));
        }
        let chunk = 1 + rng.below(40) as usize;
        same(&format!("run {}", run), &recs, chunk, rng.below(4) as usize);
    }
}
