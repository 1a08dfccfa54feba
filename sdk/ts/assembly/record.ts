// Records as the handler sees them (ABI.md section 5).

import { HEADER_SIZE, MAX_HEADERS } from "./abi";
import { inputBuf } from "./call";
import { utf8, str, bytesEqual } from "./bytes";

/** One record header; a null value is a null header value. */
export class Header {
  /** The name's bytes (UTF-8 by convention; the host does not check). */
  nameBytes: Uint8Array;
  value: Uint8Array | null;

  /** A header called name (its UTF-8 bytes), or nameBytes when given. */
  constructor(name: string, value: Uint8Array | null, nameBytes: Uint8Array | null = null) {
    this.nameBytes = nameBytes !== null ? nameBytes : utf8(name);
    this.value = value;
  }

  /** A header whose name is given as bytes. */
  static bytes(name: Uint8Array, value: Uint8Array | null): Header {
    return new Header("", value, name);
  }

  /** The name as text. */
  get name(): string {
    return str(this.nameBytes);
  }
}

// The record in progress, decoded into globals rather than into the
// Record's fields: with the incremental collector a store of a reference
// into an object costs a write barrier call, and a function that holds an
// object keeps it on the shadow stack (memory stores); the per-record path
// is written to do neither. (It cut the passthrough's own cost, above
// wazero's call floor, by about 30 %.) There is one record in progress at
// a time, and one Record object (dispatch.ts) whose getters read these.

/** Where the record is in the input buffer, and its length. */
export let recOff: i32 = 0;
export let recLen: i32 = 0;
let recTimestamp: i64 = 0;
let recOffset: i64 = 0;
let recPartition: i32 = 0;
let recInput: u32 = 0;
let recKeyLen: i32 = -1;
let recValLen: i32 = -1;
let recCount: i32 = 0;
// Views made on first use during the call; recSeq counts the records so
// that a view made for an earlier record is not handed out again.
let keyView: Uint8Array | null = null;
let valView: Uint8Array | null = null;
let hdrs: Array<Header> | null = null;
let recSeq: u32 = 0;
let keySeq: u32 = 0;
let valSeq: u32 = 0;
let hdrSeq: u32 = 0;

/**
 * The input record a handler is called with. Its key, value and headers
 * are views of the SDK's input buffer: valid only during the call (copy
 * what you keep: b.slice()). null is null (a null key, or a tombstone
 * value); an empty array is an empty key or value.
 */
export class Record {
  /** The record's Kafka timestamp, in milliseconds since the Unix epoch. */
  get timestamp(): i64 {
    return recTimestamp;
  }

  /** The record's offset in its input partition. */
  get offset(): i64 {
    return recOffset;
  }

  /** The record's input partition. */
  get partition(): i32 {
    return recPartition;
  }

  /** The index of the record's topic in the processor's inputs (0 for one input). */
  get input(): u32 {
    return recInput;
  }

  /** The key, or null. */
  get key(): Uint8Array | null {
    if (recKeyLen < 0) return null;
    if (keySeq != recSeq || keyView === null) {
      keyView = Uint8Array.wrap(inputBuf, recOff + HEADER_SIZE, recKeyLen);
      keySeq = recSeq;
    }
    return keyView;
  }

  /** The value, or null (a tombstone). */
  get value(): Uint8Array | null {
    if (recValLen < 0) return null;
    if (valSeq != recSeq || valView === null) {
      valView = Uint8Array.wrap(inputBuf, recOff + HEADER_SIZE + max(recKeyLen, 0), recValLen);
      valSeq = recSeq;
    }
    return valView;
  }

  /** The number of headers. */
  get headerCount(): i32 {
    return recCount;
  }

  /** The headers, in order (an empty array for none). */
  get headers(): Array<Header> {
    if (hdrSeq == recSeq && hdrs !== null) return hdrs!;
    const hs = new Array<Header>(recCount);
    const base = changetype<usize>(inputBuf);
    let p = recOff + HEADER_SIZE + max(recKeyLen, 0) + max(recValLen, 0);
    for (let i = 0; i < recCount; i++) {
      const nl = load<i32>(base + <usize>p);
      const vl = load<i32>(base + <usize>p + 4);
      p += 8;
      const name = Uint8Array.wrap(inputBuf, p, nl);
      p += nl;
      let value: Uint8Array | null = null;
      if (vl >= 0) {
        value = Uint8Array.wrap(inputBuf, p, vl);
        p += vl;
      }
      hs[i] = Header.bytes(name, value);
    }
    hdrs = hs;
    hdrSeq = recSeq;
    return hs;
  }

  /**
   * The value of the last header called name, or null when there is none or
   * its value is null (hasHeader tells them apart). Kafka allows repeated
   * names; the last one wins, as in most Kafka clients.
   */
  header(name: string): Uint8Array | null {
    const i = this.headerIndex(name);
    return i < 0 ? null : this.headers[i].value;
  }

  /** Whether the record has a header called name. */
  hasHeader(name: string): bool {
    return this.headerIndex(name) >= 0;
  }

  private headerIndex(name: string): i32 {
    if (recCount == 0) return -1;
    const want = utf8(name);
    const hs = this.headers;
    for (let i = hs.length - 1; i >= 0; i--) {
      if (bytesEqual(hs[i].nameBytes, want)) return i;
    }
    return -1;
  }
}

/**
 * Reads the record of len bytes at off in the input buffer into the record
 * in progress and reports whether it is well formed: the layout's lengths
 * add up to exactly len (as abi.Record.Decode checks). Views are made when
 * the handler asks for them.
 */
export function decodeRecord(off: i32, len: i32): bool {
  if (len < HEADER_SIZE || off < 0 || <i64>off + <i64>len > <i64>inputBuf.byteLength) return false;
  const at = changetype<usize>(inputBuf) + <usize>off;
  const keyLen = load<i32>(at, 24);
  const valLen = load<i32>(at, 28);
  const count = load<u32>(at, 32);
  if (keyLen < -1 || valLen < -1 || count > <u32>MAX_HEADERS) return false;
  let end = <i64>HEADER_SIZE + <i64>max(keyLen, 0) + <i64>max(valLen, 0);
  if (end > <i64>len) return false;
  // The headers: u32 name length, i32 value length (-1 null), bytes.
  for (let i: u32 = 0; i < count; i++) {
    if (<i64>len - end < 8) return false;
    const nl = load<i32>(at + <usize>end);
    const vl = load<i32>(at + <usize>end + 4);
    end += 8;
    if (nl < 0 || vl < -1) return false;
    end += <i64>nl + <i64>max(vl, 0);
    if (end > <i64>len) return false;
  }
  if (end != <i64>len) return false;
  recTimestamp = load<i64>(at, 0);
  recOffset = load<i64>(at, 8);
  recPartition = load<i32>(at, 16);
  recInput = load<u32>(at, 20);
  recOff = off;
  recLen = len;
  recKeyLen = keyLen;
  recValLen = valLen;
  recCount = <i32>count;
  recSeq++;
  return true;
}

/** The timestamp of the record in progress. */
// @ts-ignore: decorator
@inline
export function recordTimestamp(): i64 {
  return recTimestamp;
}
