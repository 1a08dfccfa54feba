// The host functions, module "wasmstream" (abi/ABI.md sections 4 and 8).
// Pointers are addresses in linear memory; every result is a value >= 0 or
// -errno (a small negative number; time_now returns an i64). A host
// refuses a module that imports anything it does not know, so the names
// and signatures here must be the ABI's: host/internal/conformance builds
// this SDK and runs it through the host's engine.

// @ts-ignore: decorator
@external("wasmstream", "emit")
export declare function host_emit(ptr: usize, len: u32): i32;

// @ts-ignore: decorator
@external("wasmstream", "output_index")
export declare function host_output_index(name: usize, len: u32): i32;

// @ts-ignore: decorator
@external("wasmstream", "store_index")
export declare function host_store_index(name: usize, len: u32): i32;

// @ts-ignore: decorator
@external("wasmstream", "config")
export declare function host_config(out: usize, cap: u32): i32;

// @ts-ignore: decorator
@external("wasmstream", "log")
export declare function host_log(level: u32, msg: usize, len: u32): i32;

// @ts-ignore: decorator
@external("wasmstream", "set_error")
export declare function host_set_error(msg: usize, len: u32): i32;

// @ts-ignore: decorator
@external("wasmstream", "state_get")
export declare function host_state_get(store: u32, key: usize, keyLen: u32, out: usize, cap: u32): i32;

// @ts-ignore: decorator
@external("wasmstream", "state_put")
export declare function host_state_put(store: u32, key: usize, keyLen: u32, val: usize, valLen: u32): i32;

// @ts-ignore: decorator
@external("wasmstream", "state_delete")
export declare function host_state_delete(store: u32, key: usize, keyLen: u32): i32;

// @ts-ignore: decorator
@external("wasmstream", "scan_open")
export declare function host_scan_open(store: u32, start: usize, startLen: u32, end: usize, endLen: u32): i32;

// @ts-ignore: decorator
@external("wasmstream", "scan_next")
export declare function host_scan_next(cursor: u32, out: usize, cap: u32): i32;

// @ts-ignore: decorator
@external("wasmstream", "scan_close")
export declare function host_scan_close(cursor: u32): i32;

// @ts-ignore: decorator
@external("wasmstream", "timer_set")
export declare function host_timer_set(kind: u32, ts: i64, key: usize, keyLen: u32): i32;

// @ts-ignore: decorator
@external("wasmstream", "timer_cancel")
export declare function host_timer_cancel(kind: u32, ts: i64, key: usize, keyLen: u32): i32;

// @ts-ignore: decorator
@external("wasmstream", "time_now")
export declare function host_time_now(clock: u32): i64;

// @ts-ignore: decorator
@external("wasmstream", "commit_mark")
export declare function host_commit_mark(key: usize, keyLen: u32): i32;
