//! The host functions (abi/ABI.md section 4) as safe calls over slices. On
//! wasm32 they are the module "wasmstream" imports; on other targets they
//! are served by the fake host in `crate::testing`, so the same SDK code
//! runs under `cargo test`. Every result is a value >= 0 or `-errno`; the
//! raw results are public for code that tests the ABI itself (the
//! conformance processors). A processor uses the typed API in the crate root.

#[cfg(target_arch = "wasm32")]
mod imports {
    #[link(wasm_import_module = "wasmstream")]
    extern "C" {
        pub fn emit(ptr: *const u8, len: u32) -> i32;
        pub fn output_index(ptr: *const u8, len: u32) -> i32;
        pub fn store_index(ptr: *const u8, len: u32) -> i32;
        pub fn config(out: *mut u8, cap: u32) -> i32;
        pub fn log(level: u32, ptr: *const u8, len: u32) -> i32;
        pub fn set_error(ptr: *const u8, len: u32) -> i32;
        pub fn state_get(store: u32, key: *const u8, key_len: u32, out: *mut u8, cap: u32) -> i32;
        pub fn state_put(store: u32, key: *const u8, key_len: u32, val: *const u8, val_len: u32) -> i32;
        pub fn state_delete(store: u32, key: *const u8, key_len: u32) -> i32;
        pub fn scan_open(store: u32, start: *const u8, start_len: u32, end: *const u8, end_len: u32) -> i32;
        pub fn scan_next(cursor: u32, out: *mut u8, cap: u32) -> i32;
        pub fn scan_close(cursor: u32) -> i32;
        pub fn commit_mark(key: *const u8, key_len: u32) -> i32;
        pub fn timer_set(kind: u32, ts: i64, key: *const u8, key_len: u32) -> i32;
        pub fn timer_cancel(kind: u32, ts: i64, key: *const u8, key_len: u32) -> i32;
        pub fn time_now(clock: u32) -> i64;
    }
}

#[cfg(target_arch = "wasm32")]
mod calls {
    use super::imports as h;
    // Lengths fit a u32: a wasm32 slice is shorter than 4 GiB.
    #[inline]
    pub fn emit(rec: &[u8]) -> i32 {
        unsafe { h::emit(rec.as_ptr(), rec.len() as u32) }
    }
    #[inline]
    pub fn output_index(name: &[u8]) -> i32 {
        unsafe { h::output_index(name.as_ptr(), name.len() as u32) }
    }
    #[inline]
    pub fn store_index(name: &[u8]) -> i32 {
        unsafe { h::store_index(name.as_ptr(), name.len() as u32) }
    }
    #[inline]
    pub fn config(out: &mut [u8]) -> i32 {
        unsafe { h::config(out.as_mut_ptr(), out.len() as u32) }
    }
    #[inline]
    pub fn log(level: u32, msg: &[u8]) -> i32 {
        unsafe { h::log(level, msg.as_ptr(), msg.len() as u32) }
    }
    #[inline]
    pub fn set_error(msg: &[u8]) -> i32 {
        unsafe { h::set_error(msg.as_ptr(), msg.len() as u32) }
    }
    #[inline]
    pub fn state_get(store: u32, key: &[u8], out: &mut [u8]) -> i32 {
        unsafe { h::state_get(store, key.as_ptr(), key.len() as u32, out.as_mut_ptr(), out.len() as u32) }
    }
    #[inline]
    pub fn state_put(store: u32, key: &[u8], value: &[u8]) -> i32 {
        unsafe { h::state_put(store, key.as_ptr(), key.len() as u32, value.as_ptr(), value.len() as u32) }
    }
    #[inline]
    pub fn state_delete(store: u32, key: &[u8]) -> i32 {
        unsafe { h::state_delete(store, key.as_ptr(), key.len() as u32) }
    }
    #[inline]
    pub fn scan_open(store: u32, start: &[u8], end: &[u8]) -> i32 {
        unsafe { h::scan_open(store, start.as_ptr(), start.len() as u32, end.as_ptr(), end.len() as u32) }
    }
    #[inline]
    pub fn scan_next(cursor: u32, out: &mut [u8]) -> i32 {
        unsafe { h::scan_next(cursor, out.as_mut_ptr(), out.len() as u32) }
    }
    #[inline]
    pub fn scan_close(cursor: u32) -> i32 {
        unsafe { h::scan_close(cursor) }
    }
    // Imported only by modules that call it (the linker keeps no unused
    // import): the host refuses a module importing commit_mark without
    // exporting wasmstream_on_commit (ABI.md 8.2).
    #[inline]
    pub fn commit_mark(key: &[u8]) -> i32 {
        unsafe { h::commit_mark(key.as_ptr(), key.len() as u32) }
    }
    // Likewise: the host refuses a module importing timer_set or
    // timer_cancel without exporting wasmstream_on_timer.
    #[inline]
    pub fn timer_set(kind: u32, ts: i64, key: &[u8]) -> i32 {
        unsafe { h::timer_set(kind, ts, key.as_ptr(), key.len() as u32) }
    }
    #[inline]
    pub fn timer_cancel(kind: u32, ts: i64, key: &[u8]) -> i32 {
        unsafe { h::timer_cancel(kind, ts, key.as_ptr(), key.len() as u32) }
    }
    /// A time (ms since the epoch), `abi::NO_TIME`, or a small negative
    /// `-errno`.
    #[inline]
    pub fn time_now(clock: u32) -> i64 {
        unsafe { h::time_now(clock) }
    }
    /// The address of `p` in linear memory, as the ABI's pointers are (a
    /// batch's staged emits, abi/ABI.md section 10). Natively the fake host
    /// hands out handles that it resolves.
    #[doc(hidden)]
    #[inline]
    pub fn address(p: *const u8) -> u32 {
        p as usize as u32
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod calls {
    pub use crate::testing::fake::*;
}

pub use calls::*;
