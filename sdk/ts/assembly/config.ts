// The processor's config and the host's log.

import { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR, MAX_LOG_SIZE } from "./abi";
import { host_config, host_log } from "./host";

let configCache: Uint8Array | null = null;

/**
 * The processor's configuration: its `config` map in the host's config
 * file, as JSON text ("{}" or empty for none; treat both as an empty
 * object). Read from the host once per instance; do not modify it. The
 * SDK does not decode JSON (AssemblyScript has no JSON in its standard
 * library; use a JSON package, or read the few fields you need).
 */
export function config(): Uint8Array {
  let c = configCache;
  if (c !== null) return c;
  const small = new Uint8Array(512);
  const n = host_config(small.dataStart, <u32>small.length);
  if (n < 0) return new Uint8Array(0); // only in a phase without config; not cached
  if (n <= small.length) {
    c = small.slice(0, n);
  } else {
    c = new Uint8Array(n);
    if (host_config(c.dataStart, <u32>n) != n) return new Uint8Array(0);
  }
  configCache = c;
  return c;
}

/** config() as text. */
export function configString(): string {
  const c = config();
  return String.UTF8.decodeUnsafe(c.dataStart, <usize>c.length);
}

/** Log levels, ordered like the host's. */
export enum Level {
  DEBUG = LOG_DEBUG,
  INFO = LOG_INFO,
  WARN = LOG_WARN,
  ERROR = LOG_ERROR,
}

// Log lines are encoded here rather than allocated: the host cuts them at
// MAX_LOG_SIZE bytes anyway, and a UTF-16 code unit is at most 3 bytes.
const logBuf: usize = memory.data(MAX_LOG_SIZE + 4);

/** Writes msg to the host's log at level, tagged by the host with the processor's name. The host cuts lines at MAX_LOG_SIZE bytes. Logging never fails the call. */
export function log(level: Level, msg: string): void {
  const units = min(msg.length, MAX_LOG_SIZE / 3);
  let n = <u32>String.UTF8.encodeUnsafe(changetype<usize>(msg), units, logBuf);
  if (units < msg.length) {
    // A long line: encode it whole (the host cuts it).
    const b = String.UTF8.encode(msg);
    host_log(<u32>level, changetype<usize>(b), <u32>b.byteLength);
    return;
  }
  host_log(<u32>level, logBuf, n);
}

/** log at DEBUG. */
export function logDebug(msg: string): void {
  log(Level.DEBUG, msg);
}

/** log at INFO. */
export function logInfo(msg: string): void {
  log(Level.INFO, msg);
}

/** log at WARN. */
export function logWarn(msg: string): void {
  log(Level.WARN, msg);
}

/** log at ERROR. */
export function logError(msg: string): void {
  log(Level.ERROR, msg);
}
