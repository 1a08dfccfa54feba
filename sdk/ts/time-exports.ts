// The time callbacks of the ABI (abi/ABI.md section 8.3). A plugin that
// sets timers or marks keys re-exports them from its entry file:
//
//     export * from "./wasmstream-sdk/time-exports";
//
// Only such plugins should: a module that exports them is a time
// processor to the host, which checks its timers after every record.

import { callback } from "./assembly/dispatch";

/** A due timer; its trigger is len bytes in the input buffer. */
export function wasmstream_on_timer(len: u32): i32 {
  return callback(len, 0);
}

/** A key marked in the ending commit window; its trigger is len bytes in the input buffer. */
export function wasmstream_on_commit(len: u32): i32 {
  return callback(len, 1);
}
