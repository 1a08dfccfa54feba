//! The shared record-layout vectors (abi/testdata/records.json): every
//! vector decodes to its fields and re-encodes to its exact bytes, and every
//! malformed encoding is refused, by this crate's codec and by the SDK's
//! input path (a malformed record fails with the SDK's message).

use std::collections::BTreeMap;
use wasmstream::abi;
use wasmstream::testing::Host;

/// A JSON value: just what records.json uses.
#[derive(Debug, Clone)]
enum Json {
    Null,
    Num(i128),
    Str(String),
    Arr(Vec<Json>),
    Obj(BTreeMap<String, Json>),
}

struct P<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> P<'a> {
    fn ws(&mut self) {
        while self.i < self.s.len() && (self.s[self.i] as char).is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) {
        self.ws();
        assert_eq!(self.s[self.i], c, "records.json: want {:?} at {}", c as char, self.i);
        self.i += 1;
    }
    fn value(&mut self) -> Json {
        self.ws();
        match self.s[self.i] {
            b'n' => {
                self.i += 4;
                Json::Null
            }
            b'"' => Json::Str(self.string()),
            b'[' => {
                self.i += 1;
                let mut v = Vec::new();
                self.ws();
                if self.s[self.i] == b']' {
                    self.i += 1;
                    return Json::Arr(v);
                }
                loop {
                    v.push(self.value());
                    self.ws();
                    self.i += 1;
                    if self.s[self.i - 1] == b']' {
                        return Json::Arr(v);
                    }
                }
            }
            b'{' => {
                self.i += 1;
                let mut m = BTreeMap::new();
                loop {
                    self.ws();
                    if self.s[self.i] == b'}' {
                        self.i += 1;
                        return Json::Obj(m);
                    }
                    let k = self.string();
                    self.eat(b':');
                    m.insert(k, self.value());
                    self.ws();
                    if self.s[self.i] == b',' {
                        self.i += 1;
                    }
                }
            }
            _ => {
                let st = self.i;
                while self.i < self.s.len() && (self.s[self.i] == b'-' || self.s[self.i].is_ascii_digit()) {
                    self.i += 1;
                }
                Json::Num(std::str::from_utf8(&self.s[st..self.i]).unwrap().parse().unwrap())
            }
        }
    }
    fn string(&mut self) -> String {
        self.eat(b'"');
        let mut out = String::new();
        loop {
            let c = self.s[self.i];
            self.i += 1;
            match c {
                b'"' => return out,
                b'\\' => {
                    let e = self.s[self.i];
                    self.i += 1;
                    match e {
                        b'u' => {
                            let h = std::str::from_utf8(&self.s[self.i..self.i + 4]).unwrap();
                            self.i += 4;
                            out.push(char::from_u32(u32::from_str_radix(h, 16).unwrap()).unwrap());
                        }
                        b'n' => out.push('\n'),
                        other => out.push(other as char),
                    }
                }
                _ => {
                    // Copy a whole UTF-8 sequence.
                    let st = self.i - 1;
                    let mut end = self.i;
                    while end < self.s.len() && (self.s[end] & 0xc0) == 0x80 {
                        end += 1;
                    }
                    out.push_str(std::str::from_utf8(&self.s[st..end]).unwrap());
                    self.i = end;
                }
            }
        }
    }
}

fn field<'a>(o: &'a Json, k: &str) -> &'a Json {
    match o {
        Json::Obj(m) => m.get(k).unwrap_or_else(|| panic!("no field {}", k)),
        _ => panic!("not an object"),
    }
}

fn num(j: &Json) -> i128 {
    match j {
        Json::Num(n) => *n,
        _ => panic!("not a number: {:?}", j),
    }
}

fn hex(j: &Json) -> Option<Vec<u8>> {
    match j {
        Json::Null => None,
        Json::Str(s) => Some((0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()),
        _ => panic!("not hex: {:?}", j),
    }
}

fn vectors() -> Json {
    let text = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../abi/testdata/records.json")).unwrap();
    P { s: &text, i: 0 }.value()
}

fn trigger_vectors() -> Json {
    let text = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../abi/testdata/triggers.json")).unwrap();
    P { s: &text, i: 0 }.value()
}

fn list<'a>(doc: &'a Json, k: &str) -> &'a [Json] {
    match field(doc, k) {
        Json::Arr(v) => v,
        _ => panic!("{} is not a list", k),
    }
}

#[test]
fn vectors_decode_and_reencode() {
    let doc = vectors();
    let vs = list(&doc, "vectors");
    assert!(vs.len() >= 7, "only {} vectors", vs.len());
    for v in vs {
        let name = match field(v, "name") {
            Json::Str(s) => s.clone(),
            _ => unreachable!(),
        };
        let enc = hex(field(v, "encoded")).unwrap();
        let d = abi::decode(&enc).unwrap_or_else(|| panic!("{}: refused", name));
        assert_eq!(d.timestamp as i128, num(field(v, "timestamp")), "{}", name);
        assert_eq!(d.offset as i128, num(field(v, "offset")), "{}", name);
        assert_eq!(d.partition as i128, num(field(v, "partition")), "{}", name);
        assert_eq!(d.index as i128, num(field(v, "index")), "{}", name);
        assert_eq!(d.key.map(|k| k.to_vec()), hex(field(v, "key")), "{}: key", name);
        assert_eq!(d.value.map(|k| k.to_vec()), hex(field(v, "value")), "{}: value", name);
        let want: Vec<(Vec<u8>, Option<Vec<u8>>)> = list(v, "headers")
            .iter()
            .map(|h| match field(h, "key") {
                Json::Str(s) => (s.as_bytes().to_vec(), hex(field(h, "value"))),
                _ => unreachable!(),
            })
            .collect();
        let got: Vec<(Vec<u8>, Option<Vec<u8>>)> =
            d.headers().map(|h| (h.name.to_vec(), h.value.map(|x| x.to_vec()))).collect();
        assert_eq!(got, want, "{}: headers", name);
        let hs: Vec<abi::Header<'_>> = d.headers().collect();
        let mut re = Vec::new();
        abi::encode(&mut re, d.timestamp, d.offset, d.partition, d.index, d.key, d.value, &hs);
        assert_eq!(re, enc, "{}: re-encoding", name);
        assert_eq!(abi::encoded_size(d.key, d.value, &hs), enc.len(), "{}: size", name);

        // Through the SDK's input path, and back out through forward: the
        // same bytes but for the emit's offset, partition and index.
        static OUT: wasmstream::Output = wasmstream::Output::new("out");
        let mut h = Host::new(|r: &wasmstream::Record| OUT.forward(r)).outputs(&["out"]);
        let res = h.process_raw(&enc);
        assert_eq!(res.error, None, "{}", name);
        let mut want = enc.clone();
        want[8..16].copy_from_slice(&(-1i64).to_le_bytes());
        want[16..20].copy_from_slice(&(-1i32).to_le_bytes());
        want[20..24].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(res.emitted[0].raw, want, "{}: forwarded", name);
    }
}

#[test]
fn malformed_are_refused() {
    let doc = vectors();
    let ms = list(&doc, "malformed");
    assert!(ms.len() >= 7);
    for m in ms {
        let enc = hex(field(m, "encoded")).unwrap();
        assert!(abi::decode(&enc).is_none(), "{:?} decoded", field(m, "name"));
        let mut h = Host::new(|_: &wasmstream::Record| Ok(()));
        let res = h.process_raw(&enc);
        assert_eq!(res.status, abi::STATUS_FAILED);
        let e = res.error.unwrap();
        assert!(e.contains("malformed record"), "{:?}: {}", field(m, "name"), e);
    }
}

/// The shared trigger vectors (abi/testdata/triggers.json): each decodes
/// to its fields and re-encodes to its bytes; each malformed one is refused.
#[test]
fn trigger_vectors_decode_and_reencode() {
    let doc = trigger_vectors();
    let vs = list(&doc, "vectors");
    assert!(vs.len() >= 4, "only {} trigger vectors", vs.len());
    for v in vs {
        let name = format!("{:?}", field(v, "name"));
        let enc = hex(field(v, "encoded")).unwrap();
        let t = abi::decode_trigger(&enc).unwrap_or_else(|| panic!("{}: refused", name));
        assert_eq!(t.timestamp as i128, num(field(v, "timestamp")), "{}", name);
        assert_eq!(t.stream_time as i128, num(field(v, "stream_time")), "{}", name);
        assert_eq!(t.wall_time as i128, num(field(v, "wall_time")), "{}", name);
        assert_eq!(t.kind as i128, num(field(v, "kind")), "{}", name);
        assert_eq!(Some(t.key.to_vec()), hex(field(v, "key")), "{}: key", name);
        let mut re = Vec::new();
        abi::encode_trigger(&mut re, &t);
        assert_eq!(re, enc, "{}: re-encoding", name);
    }
    let ms = list(&doc, "malformed");
    assert!(!ms.is_empty());
    for m in ms {
        let enc = hex(field(m, "encoded")).unwrap();
        assert!(abi::decode_trigger(&enc).is_none(), "{:?} decoded", field(m, "name"));
    }
}

/// The timer argument checks of triggers.json ("checks": kind, ts, key
/// length and the errno, 0 for none) through `abi::check_timer` (which the
/// fake host's timer_set uses), and the firing order ("order": the timers as
/// given, and as they must fire) through `abi::timer_order` (the order of
/// the fake host's pending timers).
#[test]
fn trigger_checks_and_order() {
    let doc = trigger_vectors();
    let checks = list(&doc, "checks");
    assert!(checks.len() >= 5);
    for c in checks {
        let (kind, ts, n, want) =
            (num(field(c, "kind")), num(field(c, "ts")), num(field(c, "key_len")) as usize, num(field(c, "errno")));
        // A kind beyond u32 cannot reach the import; the vectors stay within it.
        let got = abi::check_timer(kind as u32, ts as i64, n).map_or(0, |e| e.0 as i128);
        assert_eq!(got, want, "check {:?}", c);
    }
    let order = field(&doc, "order");
    let timer = |j: &Json| (num(field(j, "kind")) as u32, num(field(j, "ts")) as i64, hex(field(j, "key")).unwrap());
    let mut given: Vec<(u32, i64, Vec<u8>)> = list(order, "given").iter().map(timer).collect();
    let fired: Vec<(u32, i64, Vec<u8>)> = list(order, "fired").iter().map(timer).collect();
    given.sort_by(|a, b| abi::timer_order((a.0, a.1, &a.2), (b.0, b.1, &b.2)));
    assert_eq!(given, fired);
}

fn batch_vectors() -> Json {
    let text = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../abi/testdata/batches.json")).unwrap();
    P { s: &text, i: 0 }.value()
}

fn string(j: &Json) -> String {
    match j {
        Json::Str(s) => s.clone(),
        _ => panic!("not a string: {:?}", j),
    }
}

/// The encodings of the record and trigger vectors, by name.
fn payloads() -> BTreeMap<(String, String), Vec<u8>> {
    let mut m = BTreeMap::new();
    for (kind, doc) in [("record", vectors()), ("trigger", trigger_vectors())] {
        for v in list(&doc, "vectors") {
            m.insert((kind.to_string(), string(field(v, "name"))), hex(field(v, "encoded")).unwrap());
        }
    }
    m
}

static BOUT: wasmstream::Output = wasmstream::Output::new("out");

/// Forwards every record (a batch's first emit: in place).
fn forward_all(r: &wasmstream::Record) -> wasmstream::Result<()> {
    BOUT.forward(r)
}

/// Emits the trigger's key with its clocks as seen by time_now.
fn emit_clocks(key: &[u8]) -> wasmstream::Result<()> {
    let clocks = format!("{} {}", wasmstream::timer::stream_time()?, wasmstream::timer::wall_time()?);
    BOUT.emit(&wasmstream::Out::new(Some(key), Some(clocks.as_bytes())))
}

fn on_timer(f: &wasmstream::timer::Firing) -> wasmstream::Result<()> {
    emit_clocks(f.key())
}

fn on_commit(c: &wasmstream::Commit) -> wasmstream::Result<()> {
    emit_clocks(c.key())
}

/// The shared batch vectors (abi/testdata/batches.json): each batch splits
/// into its slots (the record and trigger vectors it names) and encodes
/// back to its exact bytes; through the SDK's wasmstream_batch (the fake
/// host's batch_raw) every record is forwarded with the bytes a single
/// call gives, and every trigger reaches its callback with its own clocks,
/// its emits at its timestamp.
#[test]
fn batch_vectors_decode_and_reencode() {
    let doc = batch_vectors();
    let payloads = payloads();
    let bs = list(&doc, "batches");
    assert!(bs.len() >= 3, "only {} batch vectors", bs.len());
    for b in bs {
        let name = string(field(b, "name"));
        let enc = hex(field(b, "encoded")).unwrap();
        let slots = abi::decode_batch(&enc).unwrap_or_else(|| panic!("{}: refused", name));
        let want: Vec<(u32, Vec<u8>)> = list(b, "slots")
            .iter()
            .map(|s| {
                let kind = string(field(s, "kind"));
                let p = payloads[&(kind.clone(), string(field(s, "name")))].clone();
                (if kind == "record" { abi::SLOT_RECORD } else { abi::SLOT_TRIGGER }, p)
            })
            .collect();
        let got: Vec<(u32, Vec<u8>)> = slots.iter().map(|(k, p)| (*k, p.to_vec())).collect();
        assert_eq!(got, want, "{}: slots", name);
        let mut re = Vec::new();
        abi::encode_batch(&mut re, &slots);
        assert_eq!(re, enc, "{}: re-encoding", name);

        let mut h = Host::new(forward_all).outputs(&["out"]).on_timer(on_timer).on_commit(on_commit);
        let outs = h.batch_raw(&enc);
        assert_eq!(outs.len(), want.len(), "{}: calls ended", name);
        for (i, ((kind, p), out)) in want.iter().zip(&outs).enumerate() {
            assert_eq!(out.error, None, "{} call {}", name, i);
            assert_eq!(out.emitted.len(), 1, "{} call {}", name, i);
            let raw = &out.emitted[0].raw;
            if *kind == abi::SLOT_RECORD {
                let mut fwd = p.clone();
                fwd[8..16].copy_from_slice(&(-1i64).to_le_bytes());
                fwd[16..20].copy_from_slice(&(-1i32).to_le_bytes());
                fwd[20..24].copy_from_slice(&0u32.to_le_bytes());
                assert_eq!(raw, &fwd, "{} call {}: forwarded", name, i);
            } else {
                let t = abi::decode_trigger(p).unwrap();
                let e = &out.emitted[0];
                assert_eq!(e.key.as_deref(), Some(t.key), "{} call {}", name, i);
                assert_eq!(e.timestamp, t.timestamp, "{} call {}", name, i);
                let clocks = format!("{} {}", t.stream_time, t.wall_time);
                assert_eq!(e.value.as_deref(), Some(clocks.as_bytes()), "{} call {}: clocks", name, i);
            }
        }
    }
}

/// The shared runs of emit entries: the records they name encode to the
/// exact bytes, split back into them, and the malformed runs are refused.
#[test]
fn emit_entry_vectors() {
    let doc = batch_vectors();
    let payloads = payloads();
    for e in list(&doc, "emits") {
        let name = string(field(e, "name"));
        let enc = hex(field(e, "encoded")).unwrap();
        let recs: Vec<Vec<u8>> =
            list(e, "records").iter().map(|r| payloads[&("record".to_string(), string(r))].clone()).collect();
        let mut got = Vec::new();
        for r in &recs {
            abi::encode_emit_entry(&mut got, r);
        }
        assert_eq!(got, enc, "emits {}", name);
        let mut rest = &enc[..];
        let mut split = Vec::new();
        while !rest.is_empty() {
            let (r, more) = abi::next_emit_entry(rest).unwrap_or_else(|| panic!("emits {}: refused", name));
            assert!(abi::decode(r).is_some(), "emits {}: an entry is not a record", name);
            split.push(r.to_vec());
            rest = more;
        }
        assert_eq!(split, recs, "emits {}: split", name);
    }
    let ms = list(&doc, "malformed_emits");
    assert!(!ms.is_empty());
    for m in ms {
        let enc = hex(field(m, "encoded")).unwrap();
        let mut rest = &enc[..];
        let mut ok = true;
        while ok && !rest.is_empty() {
            match abi::next_emit_entry(rest) {
                Some((r, more)) => {
                    ok = abi::decode(r).is_some();
                    rest = more;
                }
                None => ok = false,
            }
        }
        assert!(!ok, "malformed emits {:?} accepted", field(m, "name"));
    }
}
