// State stores (ABI.md section 4).

import { Errno } from "./abi";
import { Handle } from "./declare";
import { hostFail } from "./errors";
import { host_state_get, host_state_put, host_state_delete, host_scan_open, host_scan_next, host_scan_close } from "./host";
import { ptrOf, lenOf, prefixEnd } from "./bytes";

/** The first buffer every get reads into; a larger value is read again into its own array. */
const GET_BUF_SIZE: u32 = 1024;
const getBuf: usize = memory.data(<i32>GET_BUF_SIZE);

/**
 * A named key-value state store of the processor, declared in the host's
 * processor config. The host keeps one store per task (input partition),
 * backs it with a changelog and commits it with the call's outputs.
 * Writes are staged: later reads in the same call see them, and they stand
 * only if the call succeeds. Keys are at most MAX_KEY_SIZE bytes, values
 * at most MAX_VALUE_SIZE; an empty value is a value, distinct from a
 * missing key. A handle may also name a read-only table: get and scans
 * read it; put and delete return Errno.INVAL.
 */
export class Store extends Handle {
  constructor(name: string) {
    super(name, true);
  }

  /**
   * The value of key (a new array), or null if the key has none. On an
   * error it returns null and the call fails (takeError to handle it).
   */
  get(key: Uint8Array | null): Uint8Array | null {
    const idx = this.index();
    if (idx < 0) return null;
    let n = host_state_get(<u32>idx, ptrOf(key), lenOf(key), getBuf, GET_BUF_SIZE);
    if (n == -<i32>Errno.NOTFOUND) return null;
    if (n < 0) {
      hostFail("state_get", this.name, <Errno>-n);
      return null;
    }
    if (<u32>n <= GET_BUF_SIZE) {
      const v = new Uint8Array(n);
      memory.copy(v.dataStart, getBuf, <usize>n);
      return v;
    }
    // Read again straight into an array of the value's size; again only if
    // it changed size in between, which a host serving one call at a time
    // never does. The bound turns a broken host into an error, not a loop.
    for (let i = 0; i < 3; i++) {
      const v = new Uint8Array(n);
      const m = host_state_get(<u32>idx, ptrOf(key), lenOf(key), v.dataStart, <u32>n);
      if (m == n) return v;
      if (m == -<i32>Errno.NOTFOUND) return null;
      if (m < 0) {
        hostFail("state_get", this.name, <Errno>-m);
        return null;
      }
      n = m;
    }
    hostFail("state_get", this.name, Errno.IO);
    return null;
  }

  /**
   * Reads the value of key into out without allocating: returns its length
   * (written only when it fits out; call again with a larger array), or -1
   * if the key has none, or -2 after an error (the call fails).
   */
  getInto(key: Uint8Array | null, out: Uint8Array): i32 {
    const idx = this.index();
    if (idx < 0) return -2;
    const n = host_state_get(<u32>idx, ptrOf(key), lenOf(key), out.dataStart, <u32>out.length);
    if (n == -<i32>Errno.NOTFOUND) return -1;
    if (n < 0) {
      hostFail("state_get", this.name, <Errno>-n);
      return -2;
    }
    return n;
  }

  /** Whether key has a value. */
  has(key: Uint8Array | null): bool {
    return this.getInto(key, EMPTY) >= 0;
  }

  /** Sets key to value (null is stored as an empty value). Returns Errno.OK or the errno (TOOLARGE, INVAL for a table), which also fails the call. */
  put(key: Uint8Array | null, value: Uint8Array | null): Errno {
    const idx = this.index();
    if (idx < 0) return <Errno>-idx;
    const r = host_state_put(<u32>idx, ptrOf(key), lenOf(key), ptrOf(value), lenOf(value));
    if (r < 0) {
      hostFail("state_put", this.name, <Errno>-r);
      return <Errno>-r;
    }
    return Errno.OK;
  }

  /** Removes key; deleting a missing key is not an error. */
  delete(key: Uint8Array | null): Errno {
    const idx = this.index();
    if (idx < 0) return <Errno>-idx;
    const r = host_state_delete(<u32>idx, ptrOf(key), lenOf(key));
    if (r < 0) {
      hostFail("state_delete", this.name, <Errno>-r);
      return <Errno>-r;
    }
    return Errno.OK;
  }

  /**
   * An iterator over the keys k with start <= k < end, in byte order, with
   * the call's own staged writes applied; a null or empty end has no upper
   * bound. At most MAX_OPEN_CURSORS are open at once in one call (LIMIT);
   * close them, or read them to the end, which closes them. On an error the
   * iterator is empty and the call fails (takeError to handle it).
   */
  scan(start: Uint8Array | null, end: Uint8Array | null): Iterator {
    const idx = this.index();
    if (idx < 0) return new Iterator(this.name, -1, <Errno>-idx);
    const c = host_scan_open(<u32>idx, ptrOf(start), lenOf(start), ptrOf(end), lenOf(end));
    if (c < 0) {
      hostFail("scan_open", this.name, <Errno>-c);
      return new Iterator(this.name, -1, <Errno>-c);
    }
    return new Iterator(this.name, c, Errno.OK);
  }

  /** scan over the keys that start with prefix. */
  scanPrefix(prefix: Uint8Array): Iterator {
    return this.scan(prefix, prefixEnd(prefix));
  }
}

const EMPTY = new Uint8Array(0);

/** The first entry buffer of an iterator; it grows to fit larger entries. */
const ITER_BUF_SIZE: i32 = 512;

/**
 * A scan over a store:
 *
 *     const it = store.scan(start, end);
 *     while (it.next()) use(it.key, it.value);
 *
 * key and value are views of the iterator's buffer, valid until the next
 * call to next.
 */
export class Iterator {
  readonly store: string;
  private cursor: i32;
  private buf: Uint8Array | null = null;
  /** The current entry's key. */
  key: Uint8Array = EMPTY;
  /** The current entry's value. */
  value: Uint8Array = EMPTY;
  /** The error that ended the iteration, or Errno.OK. */
  err: Errno;

  constructor(store: string, cursor: i32, err: Errno) {
    this.store = store;
    this.cursor = cursor;
    this.err = err;
  }

  /** Advances to the next entry and reports whether there is one. At the end, or on an error, it closes the cursor and returns false. */
  next(): bool {
    if (this.cursor < 0) return false;
    let buf = this.buf;
    if (buf === null) {
      buf = new Uint8Array(ITER_BUF_SIZE);
      this.buf = buf;
    }
    for (let i = 0; i < 3; i++) {
      const n = host_scan_next(<u32>this.cursor, buf.dataStart, <u32>buf.length);
      if (n == 0) {
        this.close();
        return false;
      }
      if (n < 0) {
        this.err = <Errno>-n;
        hostFail("scan_next", this.store, this.err);
        this.close();
        return false;
      }
      if (n <= buf.length) {
        // Scan entry: u32 key length, u32 value length, key, value.
        const kl = load<u32>(buf.dataStart);
        const vl = load<u32>(buf.dataStart, 4);
        if (<u64>kl + <u64>vl + 8 != <u64>n) {
          this.err = Errno.INVAL;
          hostFail("scan_next", this.store, Errno.INVAL);
          this.close();
          return false;
        }
        this.key = Uint8Array.wrap(buf.buffer, 8, <i32>kl);
        this.value = Uint8Array.wrap(buf.buffer, 8 + <i32>kl, <i32>vl);
        return true;
      }
      buf = new Uint8Array(max(n, 2 * buf.length));
      this.buf = buf;
    }
    this.err = Errno.IO;
    hostFail("scan_next", this.store, Errno.IO);
    this.close();
    return false;
  }

  /** Releases the cursor; safe to call more than once. Returns err, or the close's own errno. */
  close(): Errno {
    if (this.cursor < 0) return this.err;
    const c = this.cursor;
    this.cursor = -1;
    this.key = EMPTY;
    this.value = EMPTY;
    const r = host_scan_close(<u32>c);
    if (r < 0 && this.err == Errno.OK) {
      this.err = <Errno>-r;
      hostFail("scan_close", this.store, this.err);
    }
    return this.err;
  }
}
