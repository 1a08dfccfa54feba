;; stager: the window-staging plugin (host/held_test.go). Every record puts 15 values of
;; 990,000 bytes (zeros) into store 0, each under a key of its own (the
;; record's offset and the put's index), 14.85 MB per record: inside every
;; per-record limit (1 MiB per value, 16 MiB per record), so only a bound
;; per commit window keeps a window of many records from holding them all.
;; It ignores what the puts return, then emits the input back to output 0.
(module
  (import "wasmstream" "emit" (func $emit (param i32 i32) (result i32)))
  (import "wasmstream" "state_put" (func $put (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 18)
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 65536)) (then (return (i32.const 0))))
    (i32.const 1024))
  (func (export "wasmstream_process") (param $n i32) (result i32)
    (local $i i32)
    (i64.store (i32.const 100) (i64.load (i32.const 1032))) ;; key: the offset...
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (i32.const 15)))
        (i32.store8 (i32.const 108) (local.get $i)) ;; ...and the put's index
        (drop (call $put (i32.const 0) (i32.const 100) (i32.const 9) (i32.const 131072) (i32.const 990000)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i64.store (i32.const 1032) (i64.const -1)) ;; offset
    (i32.store (i32.const 1044) (i32.const 0))  ;; index: output 0
    (if (i32.lt_s (call $emit (i32.const 1024) (local.get $n)) (i32.const 0))
      (then (return (i32.const 1))))
    (i32.const 0))
)
