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

/**
 * The input record a handler is called with. Its key, value and headers
 * are views of the SDK's input buffer: valid only during the call (copy
 * what you keep: b.slice()). null is null (a null key, or a tombstone
 * value); an empty array is an empty key or value.
 */
export class Record {
  /** The record's Kafka timestamp, in milliseconds since the Unix epoch. */
  timestamp: i64 = 0;
  /** The record's offset in its input partition. */
  offset: i64 = 0;
  /** The record's input partition. */
  partition: i32 = 0;
  /** The index of the record's topic in the processor's inputs (0 for one input). */
  input: u32 = 0;

  // Where the record is in the input buffer, and its layout's lengths.
  off: i32 = 0;
  len: i32 = 0;
  keyLen: i32 = -1;
  valLen: i32 = -1;
  count: i32 = 0;
  // Views made on first use during the call.
  keyView: Uint8Array | null = null;
  valView: Uint8Array | null = null;
  hdrs: Array<Header> | null = null;

  /** The key, or null. */
  get key(): Uint8Array | null {
    if (this.keyLen < 0) return null;
    let v = this.keyView;
    if (v === null) {
      v = Uint8Array.wrap(inputBuf, this.off + HEADER_SIZE, this.keyLen);
      this.keyView = v;
    }
    return v;
  }

  /** The value, or null (a tombstone). */
  get value(): Uint8Array | null {
    if (this.valLen < 0) return null;
    let v = this.valView;
    if (v === null) {
      v = Uint8Array.wrap(inputBuf, this.off + HEADER_SIZE + max(this.keyLen, 0), this.valLen);
      this.valView = v;
    }
    return v;
  }

  /** The headers, in order (an empty array for none). */
  get headers(): Array<Header> {
    let hs = this.hdrs;
    if (hs === null) {
      hs = new Array<Header>(this.count);
      const base = changetype<usize>(inputBuf);
      let p = this.off + HEADER_SIZE + max(this.keyLen, 0) + max(this.valLen, 0);
      for (let i = 0; i < this.count; i++) {
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
      this.hdrs = hs;
    }
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
    if (this.count == 0) return -1;
    const want = utf8(name);
    const hs = this.headers;
    for (let i = hs.length - 1; i >= 0; i--) {
      if (bytesEqual(hs[i].nameBytes, want)) return i;
    }
    return -1;
  }

  /**
   * Reads the record of len bytes at off in the input buffer and reports
   * whether it is well formed: the layout's lengths add up to exactly len
   * (as abi.Record.Decode checks). Only the fixed fields are read into the
   * record; views are made when the handler asks for them.
   */
  decode(off: i32, len: i32): bool {
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
    this.timestamp = load<i64>(at, 0);
    this.offset = load<i64>(at, 8);
    this.partition = load<i32>(at, 16);
    this.input = load<u32>(at, 20);
    this.off = off;
    this.len = len;
    this.keyLen = keyLen;
    this.valLen = valLen;
    this.count = <i32>count;
    this.keyView = null;
    this.valView = null;
    this.hdrs = null;
    return true;
  }
}
