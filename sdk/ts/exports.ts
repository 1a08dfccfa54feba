// The ABI's exports (abi/ABI.md sections 3 and 10), versions 1 and 2. A
// plugin's entry file re-exports them:
//
//     export * from "./wasmstream-sdk/exports";
//
// (and time-exports.ts too if it uses timers or commit marks).

import "./assembly/runtime";
import { input } from "./assembly/call";
import { init, process, batch } from "./assembly/dispatch";

/** The ABI version 1 marker; never called. */
export function wasmstream_abi_version_1(): void {}

/** The ABI version 2 marker (batches); never called. A version-1 host uses the version-1 exports. */
export function wasmstream_abi_version_2(): void {}

/** A buffer of at least size bytes for the next record, trigger or batch, or 0. */
export function wasmstream_input(size: u32): usize {
  return input(size);
}

/** Resolves the declared outputs and stores and runs the onInit hook. */
export function wasmstream_init(): i32 {
  return init();
}

/** One record, len bytes in the input buffer. */
export function wasmstream_process(len: u32): i32 {
  return process(len);
}

/** A batch of calls, len bytes in the input buffer. */
export function wasmstream_batch(len: u32): i32 {
  return batch(len);
}
