// State migration between versions (abi/ABI.md section 13). A plugin that
// migrates registers its function with onMigrate at its top level and
// re-exports the export from its entry file:
//
//     export * from "./wasmstream-sdk/migrate-exports";
//
// The host calls it once per task, before this version's first call on the
// task's stores, when they were last written by another version, whose ID
// ("<label>@<hash prefix>") it gets. It may use every Store (get, put,
// delete, scan) as a record handler may, but not emit or set timers
// (EPHASE). fail() (or an SDK call that fails) fails it: nothing it wrote
// stays, and the host rolls the processor back to the version before. It
// is bounded like one record.

import { inputBuf, curLen, callTimestamp } from "./call";
import { sdkFail, resetFailure, finishStatus } from "./errors";

let migrateFn: ((from: string) => void) | null = null;

/** Registers fn as the state migration; a later call replaces it. */
export function onMigrate(fn: (from: string) => void): void {
  migrateFn = fn;
}

/** The body of wasmstream_migrate: the version ID is len bytes of the input buffer. */
export function migrate(len: u32): i32 {
  resetFailure();
  curLen = 0;
  callTimestamp = 0;
  if (<i64>len > <i64>inputBuf.byteLength) {
    sdkFail("sdk: migrate: version ID length beyond the input buffer");
    return finishStatus();
  }
  const fn = migrateFn;
  if (fn === null) {
    sdkFail("sdk: the host asked for a migration but none is registered: call onMigrate at the plugin's top level");
    return finishStatus();
  }
  fn(String.UTF8.decode(inputBuf.slice(0, <i32>len)));
  return finishStatus();
}
