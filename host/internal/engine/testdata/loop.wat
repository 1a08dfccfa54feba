;; loop: key "spin" runs an infinite loop, key "fib" runs a loop-free
;; exponential recursion (fib 60, hours of work), anything else passes the
;; record through. wasmstream_init logs "init" so tests can count instances.
(module
  (import "wasmstream" "emit" (func $emit (param i32 i32) (result i32)))
  (import "wasmstream" "log" (func $log (param i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (data (i32.const 16) "init")
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_init") (result i32)
    (drop (call $log (i32.const 1) (i32.const 16) (i32.const 4)))
    (i32.const 0))
  (func (export "wasmstream_input") (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 65536)) (then (return (i32.const 0))))
    (i32.const 1024))
  (func $fib (param $n i64) (result i64)
    (if (result i64) (i64.lt_u (local.get $n) (i64.const 2))
      (then (local.get $n))
      (else (i64.add
        (call $fib (i64.sub (local.get $n) (i64.const 1)))
        (call $fib (i64.sub (local.get $n) (i64.const 2)))))))
  (func (export "wasmstream_process") (param $n i32) (result i32)
    (if (i32.eq (i32.load (i32.const 1048)) (i32.const 4))
      (then
        (if (i32.eq (i32.load (i32.const 1060)) (i32.const 0x6e697073)) ;; "spin"
          (then (loop $forever (br $forever))))))
    (if (i32.eq (i32.load (i32.const 1048)) (i32.const 3))
      (then
        (if (i32.eq (i32.and (i32.load (i32.const 1060)) (i32.const 0xffffff)) (i32.const 0x626966)) ;; "fib"
          (then (i64.store (i32.const 0) (call $fib (i64.const 60)))))))
    (i64.store (i32.const 1032) (i64.const -1))
    (i32.store (i32.const 1044) (i32.const 0))
    (drop (call $emit (i32.const 1024) (local.get $n)))
    (i32.const 0))
)
