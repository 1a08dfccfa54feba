// The state-migration export of the ABI (abi/ABI.md section 13). A plugin
// that migrates its state re-exports it from its entry file and registers
// its function with onMigrate:
//
//     export * from "./wasmstream-sdk/migrate-exports";
//
// Only such plugins should: the host calls it before the version's first
// call on stores another version wrote.

import { migrate } from "./assembly/migrate";

/** Migrates the task's stores from the version whose ID is len bytes in the input buffer. */
export function wasmstream_migrate(len: u32): i32 {
  return migrate(len);
}
