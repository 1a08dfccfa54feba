//! The card-velocity processor of the newcomer's path, written with the Rust SDK's
//! time helpers: per card (the record key), count the payments in the last
//! 60 s of event time, alert above 3, and pass every payment on. The same
//! processor as the Go SDK's sdk/internal/velocity and the C SDK's
//! sdk/c/test/velocity_test.c, run against the fake host.

use wasmstream::testing::{Host, Input};
use wasmstream::timer::{self, Firing};
use wasmstream::{Out, Output, Record, Result, Store};

// ---- the processor ----

static PAYMENTS: Output = wasmstream::output!("payments");
static ALERTS: Output = wasmstream::output!("alerts");
/// Per card, the timestamps (8 bytes each) of its payments in the 60 s
/// before its last one.
static RECENT: Store = wasmstream::store!("recent");
const WINDOW: i64 = 60_000;
const LIMIT: usize = 3;

/// The timestamps of v after t.
fn since(v: &[u8], t: i64) -> Vec<u8> {
    let after = |c: &&[u8]| i64::from_be_bytes((*c).try_into().unwrap()) > t;
    v.chunks_exact(8).filter(after).flatten().copied().collect()
}

fn pay(r: &Record) -> Result<()> {
    let card = r.key().unwrap_or(b"");
    let mut v = since(&RECENT.get(card)?.unwrap_or_default(), r.timestamp() - WINDOW);
    v.extend_from_slice(&r.timestamp().to_be_bytes());
    RECENT.put(card, &v)?;
    timer::set(timer::EVENT_TIME, r.timestamp() + WINDOW, card)?;
    let n = v.len() / 8;
    if n > LIMIT {
        ALERTS.emit(&Out::new(Some(card), Some(n.to_string().as_bytes())))?;
    }
    PAYMENTS.forward(r)
}

/// Drops a card 60 s (of event time) after its last payment.
fn forget(f: &Firing) -> Result<()> {
    match RECENT.get(f.key())? {
        Some(v) if since(&v, f.time() - WINDOW).is_empty() => RECENT.delete(f.key()),
        _ => Ok(()),
    }
}

wasmstream::processor!(pay, handles = [PAYMENTS, ALERTS, RECENT], on_timer = forget);

// ---- its test ----

#[test]
fn velocity() {
    let mut h = Host::new(pay as fn(&Record) -> Result<()>)
        .outputs(&["payments", "alerts"])
        .stores(&["recent"])
        .handles(&[&PAYMENTS, &ALERTS, &RECENT])
        .on_timer(forget);
    let mut got = Vec::new();
    let mut step = |card: &str, sec: i64| {
        let rec = Input {
            timestamp: sec * 1000,
            headers: vec![(b"id".to_vec(), Some(vec![got.len() as u8]))],
            ..Input::kv(card, format!("{} pays", card))
        };
        let res = h.process(&rec);
        assert_eq!(res.failed(), None);
        let p = res.to("payments");
        assert_eq!(p.len(), 1);
        assert_eq!((&p[0].value, p[0].timestamp, &p[0].headers), (&rec.value, rec.timestamp, &rec.headers));
        for a in res.to("alerts") {
            got.push(format!("{}@{}={}", card, sec, String::from_utf8_lossy(a.value.as_deref().unwrap())));
        }
    };
    for (card, sec) in [("a", 0), ("a", 10), ("b", 15), ("a", 20), ("a", 30), ("b", 40), ("a", 60), ("a", 61), ("a", 121)] {
        step(card, sec);
    }
    assert_eq!(got, ["a@30=4", "a@60=4", "a@61=5"]);
    // A card is forgotten 60 s after its last payment: b is gone, a keeps
    // the payment at 121.
    let kept = h.entries("recent");
    assert_eq!(kept.len(), 1);
    assert_eq!((kept[0].0.as_slice(), kept[0].1.len()), (&b"a"[..], 8));
}

#[test]
fn velocity_needs_its_outputs_and_store() {
    let mut h = Host::new(pay as fn(&Record) -> Result<()>)
        .outputs(&["payments"])
        .handles(&[&PAYMENTS, &ALERTS, &RECENT]);
    let e = h.start().unwrap_err();
    assert!(e.ends_with("output \"alerts\", store \"recent\""), "{}", e);
}
