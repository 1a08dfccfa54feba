// filter: keeps the records whose JSON value satisfies one condition and
// emits them unchanged to an output; everything else is dropped. The same
// config and semantics as plugins/filter in Go (see its README.md):
//
//   {"field": "user.country", "op": "eq", "value": "NL", "output": "out", "invalid_output": "bad"}
//
// ops: eq, ne, exists, gt, ge, lt, le, in. Records that are not JSON
// (tombstones and empty values included) go to invalid_output if set.
//
// The JSON scanner is a port of plugins/internal/jsonx (the Go plugins'),
// as plugins/c/filter's is: RFC 8259's grammar, nesting limited to
// MAX_DEPTH so that a hostile record cannot exhaust the stack.

import { Output, Record, handle, onInit, config, fail, takeError, utf8 } from "../../../sdk/ts";
export * from "../../../sdk/ts/exports";

const MAX_DEPTH = 1000;
const MAX_SEGS = 32;

// Kinds of JSON value, by their first byte.
const K_INVALID = 0, K_NULL = 1, K_BOOL = 2, K_NUMBER = 3, K_STRING = 4, K_OBJECT = 5, K_ARRAY = 6;

function kindOf(p: usize, n: i32): i32 {
  if (n <= 0) return K_INVALID;
  const c = load<u8>(p);
  if (c == 0x6e) return K_NULL; // n
  if (c == 0x74 || c == 0x66) return K_BOOL; // t f
  if (c == 0x22) return K_STRING;
  if (c == 0x7b) return K_OBJECT;
  if (c == 0x5b) return K_ARRAY;
  return c == 0x2d || (c >= 0x30 && c <= 0x39) ? K_NUMBER : K_INVALID;
}

// The document being scanned: d[0..n).
let d: usize = 0;
let n: i32 = 0;

function at(i: i32): u8 {
  return load<u8>(d + <usize>i);
}

function skipWs(i: i32): i32 {
  while (i < n) {
    const c = at(i);
    if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) break;
    i++;
  }
  return i;
}

function literal(i: i32, lit: string): i32 {
  const l = lit.length;
  if (n - i < l) return -1;
  for (let k = 0; k < l; k++) if (<i32>at(i + k) != lit.charCodeAt(k)) return -1;
  return i + l;
}

function digits(i: i32): i32 {
  while (i < n && at(i) >= 0x30 && at(i) <= 0x39) i++;
  return i;
}

function scanNumber(i: i32): i32 {
  if (at(i) == 0x2d) i++;
  if (i < n && at(i) == 0x30) i++;
  else if (i < n && at(i) >= 0x31 && at(i) <= 0x39) i = digits(i);
  else return -1;
  if (i < n && at(i) == 0x2e) {
    const j = digits(i + 1);
    if (j == i + 1) return -1;
    i = j;
  }
  if (i < n && (at(i) == 0x65 || at(i) == 0x45)) {
    i++;
    if (i < n && (at(i) == 0x2b || at(i) == 0x2d)) i++;
    const j = digits(i);
    if (j == i) return -1;
    i = j;
  }
  return i;
}

function hexval(c: u8): i32 {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}

function scanString(i: i32): i32 {
  for (i++; i < n;) {
    const c = at(i);
    if (c == 0x22) return i + 1;
    if (c == 0x5c) {
      if (i + 1 >= n) return -1;
      const e = at(i + 1);
      if (e == 0x22 || e == 0x5c || e == 0x2f || e == 0x62 || e == 0x66 || e == 0x6e || e == 0x72 || e == 0x74) {
        i += 2;
      } else if (e == 0x75) {
        if (n - i < 6) return -1;
        for (let k = 2; k < 6; k++) if (hexval(at(i + k)) < 0) return -1;
        i += 6;
      } else {
        return -1;
      }
    } else if (c < 0x20) {
      return -1;
    } else {
      i++;
    }
  }
  return -1;
}

// What scanContainer does with each member or element.
const MODE_SKIP = 0, MODE_FIND = 1, MODE_CONFIG = 2, MODE_LIST = 3;

function scanValue(i: i32, depth: i32): i32 {
  if (i >= n) return -1;
  const c = at(i);
  if (c == 0x22) return scanString(i);
  if (c == 0x7b || c == 0x5b) return scanContainer(i, depth, MODE_SKIP, 0);
  if (c == 0x74) return literal(i, "true");
  if (c == 0x66) return literal(i, "false");
  if (c == 0x6e) return literal(i, "null");
  if (c == 0x2d || (c >= 0x30 && c <= 0x39)) return scanNumber(i);
  return -1;
}

/** Scans the object or array at i; each member goes to the mode's handler. Returns its end, or -1. */
function scanContainer(i: i32, depth: i32, mode: i32, seg: i32): i32 {
  if (depth >= MAX_DEPTH) return -1;
  const obj = at(i) == 0x7b;
  const closer: u8 = obj ? 0x7d : 0x5d;
  i = skipWs(i + 1);
  if (i < n && at(i) == closer) return i + 1;
  let index = 0;
  while (true) {
    let key = -1;
    let kl = 0;
    if (obj) {
      if (i >= n || at(i) != 0x22) return -1;
      const end = scanString(i);
      if (end < 0) return -1;
      key = i;
      kl = end - i;
      i = skipWs(end);
      if (i >= n || at(i) != 0x3a) return -1;
      i = skipWs(i + 1);
    }
    let end: i32;
    if (mode == MODE_FIND) end = findMember(key, kl, index, i, seg, depth);
    else if (mode == MODE_CONFIG) end = configMember(key, kl, i);
    else if (mode == MODE_LIST) end = listMember(index, i);
    else end = scanValue(i, depth + 1);
    if (end < 0) return end;
    i = skipWs(end);
    if (i >= n) return -1;
    if (at(i) == closer) return i + 1;
    if (at(i) != 0x2c) return -1;
    i = skipWs(i + 1);
    index++;
  }
  return -1;
}

/** Appends the UTF-8 of r to out at o; returns the new length. */
function putUtf8(out: Uint8Array, o: i32, r: u32): i32 {
  if (r < 0x80) out[o++] = <u8>r;
  else if (r < 0x800) {
    out[o++] = <u8>(0xc0 | (r >> 6));
    out[o++] = <u8>(0x80 | (r & 0x3f));
  } else if (r < 0x10000) {
    out[o++] = <u8>(0xe0 | (r >> 12));
    out[o++] = <u8>(0x80 | ((r >> 6) & 0x3f));
    out[o++] = <u8>(0x80 | (r & 0x3f));
  } else {
    out[o++] = <u8>(0xf0 | (r >> 18));
    out[o++] = <u8>(0x80 | ((r >> 12) & 0x3f));
    out[o++] = <u8>(0x80 | ((r >> 6) & 0x3f));
    out[o++] = <u8>(0x80 | (r & 0x3f));
  }
  return o;
}

function hex4(p: usize): u32 {
  return <u32>((hexval(load<u8>(p)) << 12) | (hexval(load<u8>(p, 1)) << 8) | (hexval(load<u8>(p, 2)) << 4) | hexval(load<u8>(p, 3)));
}

/** Decodes the string token of tl bytes at tok (quotes included, already scanned); unpaired surrogates become U+FFFD. */
function unquote(tok: usize, tl: i32): Uint8Array {
  const s = tok + 1;
  const sl = tl - 2;
  const out = new Uint8Array(sl * 3 + 4);
  let o = 0;
  for (let i = 0; i < sl;) {
    const c = load<u8>(s + <usize>i);
    if (c != 0x5c) {
      out[o++] = c;
      i++;
      continue;
    }
    const e = load<u8>(s + <usize>i + 1);
    if (e == 0x75) {
      let r = hex4(s + <usize>i + 2);
      i += 6;
      if (r >= 0xd800 && r < 0xe000) {
        let r2: u32 = 0;
        if (sl - i >= 6 && load<u8>(s + <usize>i) == 0x5c && load<u8>(s + <usize>i + 1) == 0x75) r2 = hex4(s + <usize>i + 2);
        if (r < 0xdc00 && r2 >= 0xdc00 && r2 < 0xe000) {
          r = (((r - 0xd800) << 10) | (r2 - 0xdc00)) + 0x10000;
          i += 6;
        } else {
          r = 0xfffd;
        }
      }
      o = putUtf8(out, o, r);
      continue;
    }
    out[o++] = e == 0x62 ? 8 : e == 0x66 ? 12 : e == 0x6e ? 10 : e == 0x72 ? 13 : e == 0x74 ? 9 : e;
    i += 2;
  }
  return out.slice(0, o);
}

function hasBackslash(p: usize, l: i32): bool {
  for (let i = 0; i < l; i++) if (load<u8>(p + <usize>i) == 0x5c) return true;
  return false;
}

/** Whether the string token of tl bytes at tok is text. */
function tokenEquals(tok: usize, tl: i32, text: Uint8Array): bool {
  if (!hasBackslash(tok + 1, tl - 2)) {
    return tl - 2 == text.length && memory.compare(tok + 1, text.dataStart, <usize>text.length) == 0;
  }
  const u = unquote(tok, tl);
  return u.length == text.length && memory.compare(u.dataStart, text.dataStart, <usize>u.length) == 0;
}

// ---- path lookup ----

const segs = new Array<Uint8Array>();
const segIndex = new Array<i64>(); // a segment's decimal index, or -1
let foundS = -1;
let foundE = -1;

function findMember(key: i32, kl: i32, index: i32, start: i32, seg: i32, depth: i32): i32 {
  const sg = segs[seg];
  let hit: bool;
  if (sg.length == 1 && sg[0] == 0x2a) hit = true; // *
  else if (key >= 0) hit = tokenEquals(d + <usize>key, kl, sg);
  else hit = segIndex[seg] == <i64>index;
  if (hit) return findAt(start, seg + 1, depth + 1);
  return scanValue(start, depth + 1);
}

function findAt(i: i32, seg: i32, depth: i32): i32 {
  if (seg == segs.length) {
    const end = scanValue(i, depth);
    if (end >= 0) {
      foundS = i;
      foundE = end;
    }
    return end;
  }
  if (i >= n || (at(i) != 0x7b && at(i) != 0x5b)) return scanValue(i, depth);
  return scanContainer(i, depth, MODE_FIND, seg);
}

/** The last value at the path in the document at p (l bytes): false if it is not JSON; foundS is -1 if the path is not there. */
function lookup(p: usize, l: i32): bool {
  d = p;
  n = l;
  foundS = -1;
  foundE = -1;
  const end = findAt(skipWs(0), 0, 0);
  return end >= 0 && skipWs(end) == n;
}

/** The decimal index a path segment names (as Go's strconv.Atoi reads one that is >= 0), or -1. */
function indexOf(sg: Uint8Array): i64 {
  let i = sg.length > 0 && sg[0] == 0x2b ? 1 : 0;
  if (i == sg.length) return -1;
  let v: i64 = 0;
  for (; i < sg.length; i++) {
    const c = sg[i];
    if (c < 0x30 || c > 0x39) return -1;
    v = v * 10 + (c - 0x30);
    if (v > 0x7fffffff) return -1;
  }
  return v;
}

// ---- config ----

class Scalar {
  kind: i32 = K_INVALID;
  b: bool = false;
  num: f64 = 0;
  s: Uint8Array = new Uint8Array(0);
}

let op = "eq";
let value = new Scalar();
const values = new Array<Scalar>();
let out: Output | null = null;
let invalid: Output | null = null;

/** The number in the n bytes at p (beyond f64: ±Infinity, as Go's ParseFloat gives). */
function number(p: usize, l: i32): f64 {
  return F64.parseFloat(String.UTF8.decodeUnsafe(p, <usize>l));
}

/** Reads a scalar at p (l bytes); null for an object or array. */
function toScalar(p: usize, l: i32): Scalar | null {
  const sc = new Scalar();
  sc.kind = kindOf(p, l);
  if (sc.kind == K_NULL) return sc;
  if (sc.kind == K_BOOL) {
    sc.b = load<u8>(p) == 0x74;
    return sc;
  }
  if (sc.kind == K_NUMBER) {
    sc.num = number(p, l);
    return sc;
  }
  if (sc.kind == K_STRING) {
    sc.s = unquote(p, l);
    return sc;
  }
  return null;
}

// The config's members (start, length in the config; -1: absent), found
// in one pass over the object; the last duplicate wins.
const NAMES: string[] = ["field", "op", "value", "output", "invalid_output"];
const memberAt = new Array<i32>(5);
const memberLen = new Array<i32>(5);
let unknown = "";

function configMember(key: i32, kl: i32, start: i32): i32 {
  const end = scanValue(start, 1);
  if (end < 0) return -1;
  for (let i = 0; i < NAMES.length; i++) {
    if (tokenEquals(d + <usize>key, kl, utf8(NAMES[i]))) {
      memberAt[i] = start;
      memberLen[i] = end - start;
      return end;
    }
  }
  if (unknown.length == 0) unknown = String.UTF8.decodeUnsafe(d + <usize>key, <usize>kl);
  return end;
}

function listMember(index: i32, start: i32): i32 {
  const end = scanValue(start, 2);
  if (end < 0) return -1;
  const sc = toScalar(d + <usize>start, end - start);
  if (sc === null) {
    unknown = "value[" + index.toString() + "]";
    return -2; // reported by the caller
  }
  values.push(sc);
  return end;
}

function typeName(kind: i32): string {
  if (kind == K_NULL) return "null";
  if (kind == K_BOOL) return "a boolean";
  if (kind == K_NUMBER) return "a number";
  if (kind == K_STRING) return "a string";
  if (kind == K_ARRAY) return "a list";
  if (kind == K_OBJECT) return "an object";
  return "invalid";
}

function failf(key: string, msg: string): void {
  fail("filter: config: \"" + key + "\": " + msg);
}

/** The string member i (default def), or null after a fail(). */
function stringMember(i: i32, def: string): string | null {
  const s = memberAt[i];
  if (s < 0) return def;
  const p = d + <usize>s;
  const l = memberLen[i];
  if (kindOf(p, l) != K_STRING) {
    failf(NAMES[i], "must be a string, got " + typeName(kindOf(p, l)));
    return null;
  }
  const u = unquote(p, l);
  return String.UTF8.decodeUnsafe(u.dataStart, <usize>u.length);
}

function setup(): void {
  const c = config();
  d = c.dataStart;
  n = c.length;
  for (let i = 0; i < 5; i++) memberAt[i] = -1;
  unknown = "";
  const i = skipWs(0);
  if (i < n && !(literal(i, "null") >= 0 && skipWs(i + 4) == n)) {
    const end = scanValue(i, 0);
    if (end < 0 || skipWs(end) != n) return fail("filter: config: invalid JSON");
    if (at(i) != 0x7b) return fail("filter: config: must be a JSON object, got " + typeName(kindOf(d + <usize>i, n - i)));
    scanContainer(i, 0, MODE_CONFIG, 0);
  }
  if (memberAt[0] < 0) return failf("field", "required");
  const field = stringMember(0, "");
  if (field === null) return;
  const parts = field.split(".");
  if (parts.length > MAX_SEGS) return failf("field", "more than 32 segments");
  for (let k = 0; k < parts.length; k++) {
    if (parts[k].length == 0) return failf("field", "empty segment in path \"" + field + "\"");
    const sg = utf8(parts[k]);
    segs.push(sg);
    segIndex.push(indexOf(sg));
  }
  const o = stringMember(1, "eq");
  if (o === null) return;
  op = o;
  const vs = memberAt[2];
  const vp = d + <usize>max(vs, 0);
  const vl = memberLen[2];
  if (op == "eq" || op == "ne") {
    if (vs < 0) return failf("value", "required for op " + op);
    const sc = toScalar(vp, vl);
    if (sc === null) return failf("value", "must be a string, number, boolean or null for op " + op);
    value = sc;
  } else if (op == "gt" || op == "ge" || op == "lt" || op == "le") {
    if (vs < 0 || kindOf(vp, vl) != K_NUMBER) return failf("value", "must be a number for op " + op);
    value = toScalar(vp, vl)!;
  } else if (op == "in") {
    if (vs < 0 || kindOf(vp, vl) != K_ARRAY) return failf("value", "must be a non-empty list for op in");
    const cd = d, cn = n;
    d = vp;
    n = vl;
    const empty = skipWs(1) == vl - 1;
    const end = empty ? 0 : scanContainer(0, 1, MODE_LIST, 0);
    d = cd;
    n = cn;
    if (empty) return failf("value", "must be a non-empty list for op in");
    if (end < 0) return failf(unknown, "must be a string, number, boolean or null");
  } else if (op == "exists") {
    if (vs >= 0) return failf("value", "not used by op exists; remove it");
  } else {
    return failf("op", "must be one of eq, ne, exists, gt, ge, lt, le, in; got \"" + op + "\"");
  }
  const outName = stringMember(3, "out");
  const invalidName = stringMember(4, "");
  if (outName === null || invalidName === null) return;
  if (unknown.length > 0) return fail("filter: config: unknown field " + unknown + " (known: field, invalid_output, op, output, value)");
  const o1 = new Output(outName);
  if (o1.check() != 0) {
    takeError();
    return failf("output", "output \"" + outName + "\" is not declared by the processor");
  }
  out = o1;
  if (invalidName.length > 0) {
    const o2 = new Output(invalidName);
    if (o2.check() != 0) {
      takeError();
      return failf("invalid_output", "output \"" + invalidName + "\" is not declared by the processor");
    }
    invalid = o2;
  }
}

// ---- matching ----

function equal(p: usize, l: i32, want: Scalar): bool {
  const k = kindOf(p, l);
  if (k != want.kind) return false;
  if (k == K_NULL) return true;
  if (k == K_BOOL) return (load<u8>(p) == 0x74) == want.b;
  if (k == K_NUMBER) return number(p, l) == want.num;
  if (k == K_STRING) return tokenEquals(p, l, want.s);
  return false;
}

function match(p: usize, l: i32, found: bool): bool {
  if (op == "exists") return found;
  if (op == "ne") return !found || !equal(p, l, value);
  if (!found) return false;
  if (op == "eq") return equal(p, l, value);
  if (op == "in") {
    for (let i = 0; i < values.length; i++) if (equal(p, l, values[i])) return true;
    return false;
  }
  if (kindOf(p, l) != K_NUMBER) return false; // gt, ge, lt, le compare numbers only
  const x = number(p, l);
  if (op == "gt") return x > value.num;
  if (op == "ge") return x >= value.num;
  if (op == "lt") return x < value.num;
  return x <= value.num;
}

function process(r: Record): void {
  const v = r.value;
  const valid = v !== null && lookup(v.dataStart, v.length);
  let o: Output | null = null;
  if (!valid) o = invalid; // null: dropped, as documented
  else if (match(d + <usize>max(foundS, 0), foundE - foundS, foundS >= 0)) o = out;
  if (o !== null) o.forward(r);
}

onInit(setup);
handle(process);
