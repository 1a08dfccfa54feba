;; slowinit: wasmstream_init spins for as many loop iterations as the
;; processor config says (a little-endian u64; an empty config: none), then
;; writes 0xC0FFEE at 600 and sets the global $ready. A record keyed "boom"
;; traps; any other emits one record to output 0 whose partition is the
;; number of records the instance has processed since its init, or -1 if
;; what init left (the memory word, the global) is missing.
(module
  (import "wasmstream" "emit" (func $emit (param i32 i32) (result i32)))
  (import "wasmstream" "config" (func $config (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (global $seen (mut i32) (i32.const 0))
  (global $ready (mut i32) (i32.const 0))
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 4096)) (then (return (i32.const 0))))
    (i32.const 1024))
  (func (export "wasmstream_init") (result i32)
    (local $i i64) (local $n i64)
    (if (i32.eq (call $config (i32.const 512) (i32.const 8)) (i32.const 8))
      (then (local.set $n (i64.load (i32.const 512)))))
    (block $done
      (loop $spin
        (br_if $done (i64.ge_u (local.get $i) (local.get $n)))
        (local.set $i (i64.add (local.get $i) (i64.const 1)))
        (br $spin)))
    (i32.store (i32.const 600) (i32.const 0xC0FFEE))
    (global.set $ready (i32.const 1))
    (i32.const 0))
  (func (export "wasmstream_process") (param $len i32) (result i32)
    (if (i32.eq (i32.load (i32.const 1060)) (i32.const 0x6d6f6f62)) (then unreachable)) ;; "boom"
    (global.set $seen (i32.add (global.get $seen) (i32.const 1)))
    (i64.store (i32.const 2048) (i64.const 0))
    (i64.store (i32.const 2056) (i64.const -1))
    (i32.store (i32.const 2064)
      (select (global.get $seen) (i32.const -1)
        (i32.and (global.get $ready) (i32.eq (i32.load (i32.const 600)) (i32.const 0xC0FFEE)))))
    (i32.store (i32.const 2068) (i32.const 0))
    (i32.store (i32.const 2072) (i32.const -1))
    (i32.store (i32.const 2076) (i32.const -1))
    (i32.store (i32.const 2080) (i32.const 0))
    (drop (call $emit (i32.const 2048) (i32.const 36)))
    (i32.const 0)))
