// The card-velocity processor of the newcomer's path, written with the TypeScript
// SDK's time helpers: per card (the record key), count the payments in the
// last 60 s of event time, alert above 3, and pass every payment on. (A
// payment counts the card's payments in the 60 s before it; one that comes
// out of order also counts the later ones.) Its twins in the other SDKs are
// sdk/internal/velocity (Go), sdk/rust/tests/velocity.rs and
// sdk/c/test/velocity_test.c; velocity.test.mjs runs it against the fake
// host. It is a test of the SDK, not a plugin to deploy.

import { Output, Store, Record, Firing, handle, onTimer, setTimer, EVENT_TIME, utf8, getU64BE, putU64BE } from "..";
export * from "../exports";
export * from "../time-exports";

const payments = new Output("payments"), alerts = new Output("alerts");
// Per card, the timestamps (8 bytes each) of its payments in the 60 s before its last one.
const recent = new Store("recent");
const WINDOW: i64 = 60_000, LIMIT = 3;

/** The timestamps of v after t, with room for extra more at the end. */
function since(v: Uint8Array | null, t: i64, extra: i32): Uint8Array {
  const keep = new Array<i64>();
  if (v !== null) for (let i = 0; i + 8 <= v.length; i += 8) if (<i64>getU64BE(v, i) > t) keep.push(<i64>getU64BE(v, i));
  const out = new Uint8Array((keep.length + extra) * 8);
  for (let i = 0; i < keep.length; i++) putU64BE(out, i * 8, keep[i]);
  return out;
}

function pay(r: Record): void {
  const v = since(recent.get(r.key), r.timestamp - WINDOW, 1);
  putU64BE(v, v.length - 8, r.timestamp);
  recent.put(r.key, v);
  setTimer(EVENT_TIME, r.timestamp + WINDOW, r.key);
  const n = v.length / 8;
  if (n > LIMIT) alerts.emit(r.key, utf8(n.toString()));
  payments.forward(r);
}

/** Drops a card 60 s (of event time) after its last payment. */
function forget(f: Firing): void {
  if (since(recent.get(f.key), f.time - WINDOW, 0).length == 0) recent.delete(f.key);
}

handle(pay);
onTimer(forget);
