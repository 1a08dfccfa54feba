// wordcount: splits each record's value into words, keeps a running count
// per word in the store "counts" (8-byte big-endian) and emits word ->
// count to the output "counts": for each distinct word of the record, in
// order of first appearance (emit: update), or once per commit window for
// each word that changed in it (emit: commit, through commit marks), like
// plugins/wordcount in Go (see its README.md).
// Config: {"value_format": "decimal" | "int64", "emit": "update" | "commit"}.
//
// Words are maximal runs of letters and digits, lowercased, with the
// letters and case mappings of the C plugin (plugins/c/wordcount): those of
// ASCII, Latin-1, Latin Extended-A and -B, Greek, Cyrillic, and the CJK,
// Hiragana, Katakana and Hangul blocks; that is the Go plugin's rule for
// text in those scripts (see the C plugin for where it differs).

import {
  Output, Store, Record, Commit, Errno, handle, onInit, onCommit, config, fail, takeError, lastError, mark, str, MAX_KEY_SIZE,
} from "../../../sdk/ts";
export * from "../../../sdk/ts/exports";
export * from "../../../sdk/ts/time-exports";

const counts = new Store("counts");
const out = new Output("counts");

/** value_format: decimal text (true) or an 8-byte big-endian integer, Kafka's LongSerializer (false). */
let decimal = true;
/** emit: commit: a record updates the counts and marks its words; committed emits each marked word's count once per window. */
let atCommit = false;

/**
 * Reads the config: a flat JSON object of string fields (the host hands
 * the processor's YAML config as JSON), without a JSON library.
 */
function setup(): void {
  const c = str(config()).trim();
  let format = "decimal";
  let mode = "update";
  if (c != "" && c != "null") {
    if (!c.startsWith("{") || !c.endsWith("}")) {
      fail("wordcount: config: must be a JSON object");
      return;
    }
    let i = skip(c, 1);
    while (i < c.length - 1) {
      const name = quoted(c, i);
      if (name === null) return;
      i = skip(c, i + name.length + 2);
      if (i >= c.length || c.charCodeAt(i) != 0x3a) return unreadable();
      i = skip(c, i + 1);
      const value = quoted(c, i);
      if (value === null) {
        fail("wordcount: config: \"" + name + "\": must be a string");
        return;
      }
      i = skip(c, i + value.length + 2);
      if (name == "value_format") format = value;
      else if (name == "emit") mode = value;
      else {
        fail("wordcount: config: unknown field \"" + name + "\" (known: emit, value_format)");
        return;
      }
      if (i < c.length - 1) {
        if (c.charCodeAt(i) != 0x2c) return unreadable();
        i = skip(c, i + 1);
      }
    }
  }
  if (format != "decimal" && format != "int64") {
    fail("wordcount: config: \"value_format\": must be \"decimal\" or \"int64\"; got \"" + format + "\"");
    return;
  }
  if (mode != "update" && mode != "commit") {
    fail("wordcount: config: \"emit\": must be \"update\" or \"commit\"; got \"" + mode + "\"");
    return;
  }
  decimal = format == "decimal";
  atCommit = mode == "commit";
}

function unreadable(): void {
  fail("wordcount: config: cannot read the config");
}

/** The index of the first non-space at or after i. */
function skip(c: string, i: i32): i32 {
  while (i < c.length) {
    const ch = c.charCodeAt(i);
    if (ch != 0x20 && ch != 0x09 && ch != 0x0a && ch != 0x0d) break;
    i++;
  }
  return i;
}

/** The string (without escapes) that starts with a quote at i, or null. */
function quoted(c: string, i: i32): string | null {
  if (i >= c.length || c.charCodeAt(i) != 0x22) return null;
  const end = c.indexOf("\"", i + 1);
  if (end < 0) return null;
  return c.substring(i + 1, end);
}

// Per-record scratch, reused: the lowercased words one after another in
// text, their ends, and the distinct ones (start, end, count in the
// record). Nothing here is allocated per record but the words' keys.
let text = new Uint8Array(256);
let textLen = 0;
const ends = new Array<i32>();
const dStart = new Array<i32>();
const dEnd = new Array<i32>();
const dCount = new Array<u64>();
const stored = new Uint8Array(8);
const be = new Uint8Array(8);

function process(r: Record): void {
  const v = r.value;
  split(v === null ? 0 : v.dataStart, v === null ? 0 : v.length);
  dStart.length = 0;
  dEnd.length = 0;
  dCount.length = 0;
  let start = 0;
  const base = text.dataStart;
  for (let i = 0; i < ends.length; i++) {
    const end = unchecked(ends[i]);
    const n = end - start;
    let j = 0;
    for (; j < dStart.length; j++) {
      const s = unchecked(dStart[j]);
      if (unchecked(dEnd[j]) - s == n && memory.compare(base + <usize>s, base + <usize>start, <usize>n) == 0) break;
    }
    if (j < dStart.length) dCount[j] = dCount[j] + 1;
    else {
      dStart.push(start);
      dEnd.push(end);
      dCount.push(1);
    }
    start = end;
  }
  for (let i = 0; i < dStart.length; i++) {
    const key = Uint8Array.wrap(text.buffer, dStart[i], dEnd[i] - dStart[i]);
    const total = count(key) + dCount[i];
    if (lastError() !== null) return;
    store<u64>(be.dataStart, bswap<u64>(total));
    counts.put(key, be);
    if (atCommit) {
      // Marks are staged like state writes: a record that fails after this leaves none.
      mark(key);
      const e = lastError();
      if (e === null) continue;
      if (e.errno != Errno.LIMIT) return;
      // The window holds as many marked keys as the host allows
      // (limits.commit_marks): this word's count goes out now instead.
      takeError();
    }
    emit(key, total);
  }
}

/**
 * The commit callback of emit: commit, once per word marked in the ending
 * window, in key order: it emits the word's count as it stands at the end
 * of the window, with the timestamp of the last record that changed it.
 */
function committed(c: Commit): void {
  const n = counts.getInto(c.key, stored);
  // Missing: only a time to live on the store removes a count, and it
  // expired after the record that marked it; there is no count to emit.
  if (n == -1) return;
  if (n != 8) {
    if (n >= 0) badCount(c.key, n);
    return;
  }
  emit(c.key, bswap<u64>(load<u64>(stored.dataStart)));
}

function emit(word: Uint8Array, total: u64): void {
  if (decimal) out.emit(word, Uint8Array.wrap(String.UTF8.encode(total.toString())));
  else {
    const v = new Uint8Array(8);
    store<u64>(v.dataStart, bswap<u64>(total));
    out.emit(word, v);
  }
}

/** The stored count of key (0 if none). Counts are 8-byte big-endian unsigned integers. */
function count(key: Uint8Array): u64 {
  const n = counts.getInto(key, stored);
  if (n < 0) return 0;
  if (n != 8) {
    badCount(key, n);
    return 0;
  }
  return bswap<u64>(load<u64>(stored.dataStart));
}

function badCount(key: Uint8Array, n: i32): void {
  fail("wordcount: store \"counts\" holds " + n.toString() + " bytes for word \"" + str(key) + "\", want an 8-byte count");
}

// ---- words ----

/** Splits the n bytes at s into text and ends: runs of word characters, lowercased; words over MAX_KEY_SIZE skipped. */
function split(s: usize, n: i32): void {
  textLen = 0;
  ends.length = 0;
  let start = 0;
  let i = 0;
  while (i < n) {
    const c = load<u8>(s + <usize>i);
    let r: i32;
    if (c < 0x80) {
      r = c;
      i++;
    } else {
      r = nextRune(s, n, i);
      i += runeLen;
    }
    const l = r < 0 ? -1 : wordLower(r);
    if (l < 0) start = flush(start);
    else putRune(l);
  }
  flush(start);
}

let runeLen = 1;

/** The code point at s[i..n] (its length in runeLen), or -1 for invalid UTF-8 (length 1). */
function nextRune(s: usize, n: i32, i: i32): i32 {
  const c = <i32>load<u8>(s + <usize>i);
  runeLen = 1;
  const len = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
  if (len == 0 || i + len > n) return -1;
  let r = c & (0x3f >> (len - 1));
  for (let k = 1; k < len; k++) {
    const b = <i32>load<u8>(s + <usize>(i + k));
    if ((b & 0xc0) != 0x80) return -1;
    r = (r << 6) | (b & 0x3f);
  }
  const minimum = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
  if (r < minimum || r > 0x10ffff || (r >= 0xd800 && r < 0xe000)) return -1;
  runeLen = len;
  return r;
}

/** The lowercase of a word character, or -1 if r is not one (plugins/c/wordcount's table). */
function wordLower(r: i32): i32 {
  if (r < 0x80) {
    if (r >= 0x41 && r <= 0x5a) return r + 32;
    if ((r >= 0x61 && r <= 0x7a) || (r >= 0x30 && r <= 0x39)) return r;
    return -1;
  }
  if (r == 0xaa || r == 0xb5 || r == 0xba) return r; // ª µ º: lowercase already
  if (r >= 0xc0 && r <= 0xde && r != 0xd7) return r + 32;
  if (r >= 0xdf && r <= 0xff && r != 0xf7) return r;
  if (r >= 0x100 && r <= 0x17f) { // Latin Extended-A: pairs
    if (r == 0x130) return 0x69; // İ -> i (Go's simple mapping)
    if (r == 0x131 || r == 0x138 || r == 0x149 || r == 0x17f) return r;
    if (r == 0x178) return 0xff;
    if ((r >= 0x139 && r <= 0x148) || (r >= 0x179 && r <= 0x17e)) return r & 1 ? r + 1 : r;
    return r & 1 ? r : r + 1;
  }
  if (r >= 0x180 && r <= 0x24f) return r;
  if (r >= 0x391 && r <= 0x3ab && r != 0x3a2) return r + 32; // Greek capitals
  if (r == 0x386) return 0x3ac;
  if (r >= 0x388 && r <= 0x38a) return r + 37;
  if (r == 0x38c) return 0x3cc;
  if (r == 0x38e || r == 0x38f) return r + 63;
  if ((r >= 0x3ac && r <= 0x3ce) || r == 0x390) return r;
  if (r >= 0x410 && r <= 0x42f) return r + 32; // Cyrillic
  if (r >= 0x400 && r <= 0x40f) return r + 80;
  if (r >= 0x430 && r <= 0x45f) return r;
  if (r >= 0x460 && r <= 0x481) return r & 1 ? r : r + 1;
  if (r >= 0x48a && r <= 0x4bf) return r & 1 ? r : r + 1;
  if (r >= 0x4d0 && r <= 0x52f) return r & 1 ? r : r + 1;
  if ((r >= 0x3040 && r <= 0x309f && r != 0x309b && r != 0x309c) || (r >= 0x30a1 && r <= 0x30fa) ||
    (r >= 0x4e00 && r <= 0x9fff) || (r >= 0xac00 && r <= 0xd7a3)) return r;
  return -1;
}

function putRune(r: i32): void {
  if (textLen + 4 > text.length) {
    const t = new Uint8Array(text.length * 2);
    memory.copy(t.dataStart, text.dataStart, <usize>textLen);
    text = t;
  }
  const p = text.dataStart + <usize>textLen;
  if (r < 0x80) {
    store<u8>(p, <u8>r);
    textLen += 1;
  } else if (r < 0x800) {
    store<u8>(p, <u8>(0xc0 | (r >> 6)));
    store<u8>(p, <u8>(0x80 | (r & 0x3f)), 1);
    textLen += 2;
  } else if (r < 0x10000) {
    store<u8>(p, <u8>(0xe0 | (r >> 12)));
    store<u8>(p, <u8>(0x80 | ((r >> 6) & 0x3f)), 1);
    store<u8>(p, <u8>(0x80 | (r & 0x3f)), 2);
    textLen += 3;
  } else {
    store<u8>(p, <u8>(0xf0 | (r >> 18)));
    store<u8>(p, <u8>(0x80 | ((r >> 12) & 0x3f)), 1);
    store<u8>(p, <u8>(0x80 | ((r >> 6) & 0x3f)), 2);
    store<u8>(p, <u8>(0x80 | (r & 0x3f)), 3);
    textLen += 4;
  }
}

/** Ends the word being built at start, skipping it if it is over MAX_KEY_SIZE; returns where the next one starts. */
function flush(start: i32): i32 {
  if (textLen == start) return start;
  if (textLen - start > MAX_KEY_SIZE) {
    textLen = start;
    return start;
  }
  ends.push(textLen);
  return textLen;
}

onInit(setup);
handle(process);
onCommit(committed);
