// Errors. AssemblyScript has no exceptions, so a failure is state of the
// call in progress (a record, a timer or commit callback, or init): the
// first SDK call that fails records it, fail() records the plugin's own,
// and when the handler returns the SDK fails the call with its message
// (set_error, status FAILED). A plugin that handles an error itself takes
// it with takeError(), and the call goes on as if it had not failed. So an
// error the plugin ignores never passes silently: it fails the call, as a
// Go handler that returns the error does.

import { Errno, errnoText, STATUS_FAILED, STATUS_OK, MAX_LOG_SIZE } from "./abi";
import { host_set_error } from "./host";

/** An error of the call in progress: an SDK call that failed, or the plugin's own (fail). */
export class SdkError {
  /** The text the host reports for the failed call. */
  message: string;
  /** The host's errno for a host call that failed; Errno.OK for fail(). */
  errno: Errno;
  /** The import that failed ("state_put"); empty for fail(). */
  call: string;
  /** The output or store the call addressed; empty for calls that address neither. */
  name: string;

  constructor(message: string, errno: Errno = Errno.OK, call: string = "", name: string = "") {
    this.message = message;
    this.errno = errno;
    this.call = call;
    this.name = name;
  }
}

let failure: SdkError | null = null;

/**
 * Fails the call in progress with message: when the handler returns, its
 * emits, state writes, timer changes and marks are discarded and the host
 * applies the processor's error policy. A later fail() replaces the message.
 */
export function fail(message: string): void {
  if (message.length == 0) message = "record rejected (fail was called with no text)";
  failure = new SdkError(message);
}

/** Whether the call in progress has failed (an SDK call or fail()). */
export function failed(): bool {
  return failure !== null;
}

/**
 * Returns the call's error and clears it: the plugin handles it, and the
 * call succeeds unless something else fails it. null if the call has not
 * failed. (Errors the host already made fatal, EIO and the per-call
 * limits, still fail the call on the host's side.)
 */
export function takeError(): SdkError | null {
  const f = failure;
  failure = null;
  return f;
}

/** The call's error without clearing it, or null. */
export function lastError(): SdkError | null {
  return failure;
}

/**
 * Records a failed host call, unless the call has failed already (the
 * first cause is the one to report): "sdk: state_put "counts": ETOOLARGE:
 * over the size limit", as the Go SDK words it.
 */
export function hostFail(call: string, name: string, errno: Errno): void {
  if (failure !== null) return;
  let msg = "sdk: " + call;
  if (name.length > 0) msg += " \"" + name + "\"";
  failure = new SdkError(msg + ": " + errnoText(errno), errno, call, name);
}

/** Records an SDK error that is not a host call's, unless the call has failed already. */
export function sdkFail(message: string): void {
  if (failure === null) failure = new SdkError(message);
}

/** Forgets the failure state: a new call starts. */
export function resetFailure(): void {
  failure = null;
}

/** Ends a call: reports the failure to the host, if any, and returns the status. */
export function finishStatus(): i32 {
  const f = failure;
  if (f === null) return STATUS_OK;
  failure = null;
  setError(f.message);
  return STATUS_FAILED;
}

/** Calls set_error with msg, cut at MAX_LOG_SIZE bytes (the host cuts it there too). */
export function setError(msg: string): void {
  const b = String.UTF8.encode(msg);
  host_set_error(changetype<usize>(b), <u32>min(b.byteLength, MAX_LOG_SIZE));
}
