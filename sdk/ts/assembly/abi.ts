// The constants of the ABI (abi/ABI.md; the Go package abi has the same
// values).

/** A host function's error (ABI.md section 6). Numbers never change meaning. */
export enum Errno {
  /** Not an error. */
  OK = 0,
  /** A pointer or length outside the plugin's memory (also fails the call). */
  FAULT = 1,
  /** A malformed argument, or a write to a read-only table. */
  INVAL = 2,
  /** An output index the processor did not declare (also fails the call). */
  NOOUTPUT = 3,
  /** A store index the processor did not declare. */
  NOSTORE = 4,
  /** The key has no value. */
  NOTFOUND = 5,
  /** A key, value or record over its limit. */
  TOOLARGE = 6,
  /** No such scan cursor. */
  NOCURSOR = 7,
  /** The call is not allowed now (emit, state or time during init). */
  PHASE = 8,
  /** A limit was reached (cursors, timers, marks; or a per-call limit, which also fails the call). */
  LIMIT = 9,
  /** The host could not serve the call; the call fails. */
  IO = 10,
  /** No output or store with that name. */
  NONAME = 11,
  /** An emitted record's timestamp outside what its output accepts (also fails the call). */
  TIMESTAMP = 12,
}

/** The errno's symbolic name, such as "ETOOLARGE". */
export function errnoName(e: Errno): string {
  switch (e) {
    case Errno.FAULT: return "EFAULT";
    case Errno.INVAL: return "EINVAL";
    case Errno.NOOUTPUT: return "ENOOUTPUT";
    case Errno.NOSTORE: return "ENOSTORE";
    case Errno.NOTFOUND: return "ENOTFOUND";
    case Errno.TOOLARGE: return "ETOOLARGE";
    case Errno.NOCURSOR: return "ENOCURSOR";
    case Errno.PHASE: return "EPHASE";
    case Errno.LIMIT: return "ELIMIT";
    case Errno.IO: return "EIO";
    case Errno.NONAME: return "ENONAME";
    case Errno.TIMESTAMP: return "ETIMESTAMP";
  }
  return "E" + (<i32>e).toString();
}

/** The errno as the Go SDK words it: "ETOOLARGE: over the size limit". */
export function errnoText(e: Errno): string {
  let t = "";
  switch (e) {
    case Errno.FAULT: t = "pointer or length outside plugin memory"; break;
    case Errno.INVAL: t = "malformed argument"; break;
    case Errno.NOOUTPUT: t = "output not declared by the processor"; break;
    case Errno.NOSTORE: t = "store not declared by the processor"; break;
    case Errno.NOTFOUND: t = "key not found"; break;
    case Errno.TOOLARGE: t = "over the size limit"; break;
    case Errno.NOCURSOR: t = "no such scan cursor"; break;
    case Errno.PHASE: t = "call not allowed in this phase"; break;
    case Errno.LIMIT: t = "per-record limit reached"; break;
    case Errno.IO: t = "host I/O failure"; break;
    case Errno.NONAME: t = "no output or store with that name"; break;
    case Errno.TIMESTAMP: t = "timestamp outside what the output accepts"; break;
    default: return "errno " + (<i32>e).toString();
  }
  return errnoName(e) + ": " + t;
}

/** The largest state key, in bytes. */
export const MAX_KEY_SIZE: i32 = 4 << 10;
/** The largest state value, in bytes. */
export const MAX_VALUE_SIZE: i32 = 1 << 20;
/** The largest emitted record (its encoding), in bytes. */
export const MAX_RECORD_SIZE: i32 = 1 << 20;
/** The most headers a record has. */
export const MAX_HEADERS: i32 = 1024;
/** The longest log line or error message the host keeps, in bytes. */
export const MAX_LOG_SIZE: i32 = 4 << 10;
/** The most scan cursors open at once in one call. */
export const MAX_OPEN_CURSORS: i32 = 16;
/** The largest timer or commit-mark key, in bytes. */
export const MAX_TIMER_KEY_SIZE: i32 = 4 << 10;

/** The stream time of a task that has seen no record with a timestamp. */
export const NO_TIME: i64 = i64.MIN_VALUE;

/** The record layout's fixed part (ABI.md section 5). */
export const HEADER_SIZE: i32 = 36;
/** The trigger layout's fixed part (ABI.md section 8.4). */
export const TRIGGER_HEADER_SIZE: i32 = 32;

/** Status of a call: done, its effects stand. */
export const STATUS_OK: i32 = 0;
/** Status of a call: failed (the plugin said why with set_error). */
export const STATUS_FAILED: i32 = 1;

// Batches (ABI.md section 10).
export const BATCH_HEADER_SIZE: i32 = 16;
export const BATCH_COUNT: i32 = 0;
export const BATCH_DONE: i32 = 4;
export const BATCH_STOP: i32 = 8;
export const SLOT_HEADER_SIZE: i32 = 24;
export const SLOT_KIND: i32 = 0;
export const SLOT_STATUS: i32 = 4;
export const SLOT_OUT_PTR: i32 = 8;
export const SLOT_OUT_LEN: i32 = 12;
export const SLOT_LEN: i32 = 20;
export const SLOT_RECORD: u32 = 0;

/** Log levels. */
export const LOG_DEBUG: u32 = 0;
export const LOG_INFO: u32 = 1;
export const LOG_WARN: u32 = 2;
export const LOG_ERROR: u32 = 3;
