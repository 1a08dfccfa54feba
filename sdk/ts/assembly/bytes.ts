// Byte helpers: UTF-8 text and big-endian integers, the encodings the
// window and join helpers keep in the store (the Go SDK's).

/** The UTF-8 bytes of s. */
export function utf8(s: string): Uint8Array {
  return Uint8Array.wrap(String.UTF8.encode(s));
}

/** b decoded as UTF-8 ("" for null). */
export function str(b: Uint8Array | null): string {
  if (b === null) return "";
  return String.UTF8.decodeUnsafe(b.dataStart, <usize>b.length);
}

/** Whether a and b hold the same bytes (null equals only null). */
export function bytesEqual(a: Uint8Array | null, b: Uint8Array | null): bool {
  if (a === null || b === null) return a === b;
  if (a.length != b.length) return false;
  return memory.compare(a.dataStart, b.dataStart, <usize>a.length) == 0;
}

/** Compares a and b in byte order: negative, 0 or positive. */
export function bytesCompare(a: Uint8Array, b: Uint8Array): i32 {
  const n = min(a.length, b.length);
  const c = memory.compare(a.dataStart, b.dataStart, <usize>n);
  if (c != 0) return c;
  return a.length - b.length;
}

/** A copy of b (null stays null). */
export function copyBytes(b: Uint8Array | null): Uint8Array | null {
  if (b === null) return null;
  return b.slice(0);
}

/** a followed by b, in a new array. */
export function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  memory.copy(out.dataStart, a.dataStart, <usize>a.length);
  memory.copy(out.dataStart + <usize>a.length, b.dataStart, <usize>b.length);
  return out;
}

/** The big-endian u64 at b[off..off+8]. */
export function getU64BE(b: Uint8Array, off: i32): u64 {
  if (off < 0 || off + 8 > b.length) {
    throw new RangeError("getU64BE: out of range");
  }
  return bswap<u64>(load<u64>(b.dataStart + <usize>off));
}

/** Writes v big-endian at b[off..off+8]. */
export function putU64BE(b: Uint8Array, off: i32, v: u64): void {
  if (off < 0 || off + 8 > b.length) {
    throw new RangeError("putU64BE: out of range");
  }
  store<u64>(b.dataStart + <usize>off, bswap<u64>(v));
}

/** v as 8 big-endian bytes. */
export function u64BE(v: u64): Uint8Array {
  const b = new Uint8Array(8);
  store<u64>(b.dataStart, bswap<u64>(v));
  return b;
}

/** The decimal text of v, as bytes. */
export function decimal(v: i64): Uint8Array {
  return utf8(v.toString());
}

/** The smallest key greater than every key that starts with prefix, or null (no upper bound) when there is none. */
export function prefixEnd(prefix: Uint8Array): Uint8Array | null {
  for (let i = prefix.length - 1; i >= 0; i--) {
    if (prefix[i] != 0xff) {
      const end = prefix.slice(0, i + 1);
      end[i] = end[i] + 1;
      return end;
    }
  }
  return null;
}

// Raw views for host calls: a null or empty array is address 0, length 0.

/** The address of b's bytes (0 for null). */
// @ts-ignore: decorator
@inline
export function ptrOf(b: Uint8Array | null): usize {
  return b === null ? 0 : b.dataStart;
}

/** b's length (0 for null). */
// @ts-ignore: decorator
@inline
export function lenOf(b: Uint8Array | null): u32 {
  return b === null ? 0 : <u32>b.length;
}
