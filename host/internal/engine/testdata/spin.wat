;; spin: a valid plugin whose extra exports measure the cost of interrupt
;; checks: spin(n) runs a loop n times, fib(n) makes fib(n)*~3 calls and no
;; loop iteration.
(module
  (memory (export "memory") 1)
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 4096)) (then (return (i32.const 0))))
    (i32.const 1024))
  (func (export "wasmstream_process") (param $n i32) (result i32) (i32.const 0))
  (func (export "spin") (param $n i32)
    (loop $l
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $l (local.get $n))))
  (func $fib (export "fib") (param $n i64) (result i64)
    (if (result i64) (i64.lt_u (local.get $n) (i64.const 2))
      (then (local.get $n))
      (else (i64.add
        (call $fib (i64.sub (local.get $n) (i64.const 1)))
        (call $fib (i64.sub (local.get $n) (i64.const 2)))))))
)
