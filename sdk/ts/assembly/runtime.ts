// What AssemblyScript's runtime imports from the module "env", which a
// wasmstream host refuses (ABI.md section 2), redirected by the compiler
// flags in build.mjs (--use abort=..., trace=..., seed=...).

import { LOG_ERROR, LOG_DEBUG, MAX_LOG_SIZE } from "./abi";
import { host_log, host_set_error } from "./host";

const buf: usize = memory.data(MAX_LOG_SIZE);
let bufLen: i32 = 0;
let aborting = false;

/** Appends s to buf, as UTF-8, as far as it fits; no allocation. */
function put(s: string | null): void {
  if (s === null) return;
  const room = MAX_LOG_SIZE - bufLen;
  const units = min(s.length, room / 3);
  bufLen += <i32>String.UTF8.encodeUnsafe(changetype<usize>(s), units, buf + <usize>bufLen);
}

function putNum(n: u32): void {
  // Digits without allocating.
  let tmp = n;
  let digits = 1;
  while (tmp >= 10) {
    tmp /= 10;
    digits++;
  }
  if (bufLen + digits > MAX_LOG_SIZE) return;
  for (let i = digits - 1; i >= 0; i--) {
    store<u8>(buf + <usize>(bufLen + i), <u8>(48 + n % 10));
    n /= 10;
  }
  bufLen += digits;
}

/**
 * abort: an assertion, a bounds check or an allocation failed, or the
 * plugin threw (AssemblyScript has no exceptions). The call cannot go on:
 * the message is logged at error level and given to set_error, and the
 * module traps, so the host fails the call and replaces the instance. It
 * allocates nothing (it may be an allocation that failed).
 */
export function abortHandler(message: string | null, fileName: string | null, line: u32, column: u32): void {
  if (!aborting) {
    aborting = true;
    bufLen = 0;
    put("abort: ");
    put(message);
    if (fileName !== null) {
      put(" (");
      put(fileName);
      put(":");
      putNum(line);
      put(":");
      putNum(column);
      put(")");
    }
    host_log(LOG_ERROR, buf, <u32>bufLen);
    host_set_error(buf, <u32>bufLen);
  }
  unreachable();
}

/** trace: a debug line in the host's log. */
export function traceHandler(message: string, n: i32 = 0, a0: f64 = 0, a1: f64 = 0, a2: f64 = 0, a3: f64 = 0, a4: f64 = 0): void {
  let s = "trace: " + message;
  if (n > 0) s += " " + a0.toString();
  if (n > 1) s += " " + a1.toString();
  if (n > 2) s += " " + a2.toString();
  if (n > 3) s += " " + a3.toString();
  if (n > 4) s += " " + a4.toString();
  const b = String.UTF8.encode(s);
  host_log(LOG_DEBUG, changetype<usize>(b), <u32>b.byteLength);
}

// @ts-ignore: decorator
@external("wasi_snapshot_preview1", "random_get")
declare function random_get(ptr: usize, len: u32): u16;

/** seed: Math.random's seed, from the host's WASI random source (deterministic per instance on a wasmstream host, ABI.md section 7). */
export function seedHandler(): f64 {
  const p = memory.data(8);
  random_get(p, 8);
  return reinterpret<f64>(load<u64>(p) & 0x000fffffffffffff | 0x3ff0000000000000);
}
