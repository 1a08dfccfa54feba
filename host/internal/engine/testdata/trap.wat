;; trap: key "boom" hits unreachable; key "exit" calls proc_exit(3); key
;; "pani" writes a Go-style panic line to stderr, then traps; anything else
;; passes through. A counter in memory (at 0) counts records since the
;; instance started and is sent as the emitted record's partition, so tests
;; can see that a trapped instance was replaced.
(module
  (import "wasmstream" "emit" (func $emit (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (data (i32.const 64) "panic: boom\n\ngoroutine 1 [running]:\n")
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 65536)) (then (return (i32.const 0))))
    (i32.const 1024))
  (func (export "wasmstream_process") (param $n i32) (result i32)
    (local $k i32)
    (i32.store (i32.const 0) (i32.add (i32.load (i32.const 0)) (i32.const 1)))
    (if (i32.eq (i32.load (i32.const 1048)) (i32.const 4))
      (then
        (local.set $k (i32.load (i32.const 1060)))
        (if (i32.eq (local.get $k) (i32.const 0x6d6f6f62)) (then unreachable)) ;; "boom"
        (if (i32.eq (local.get $k) (i32.const 0x74697865)) (then (call $exit (i32.const 3)))) ;; "exit"
        (if (i32.eq (local.get $k) (i32.const 0x696e6170)) ;; "pani"
          (then
            (i32.store (i32.const 32) (i32.const 64)) ;; iov.base
            (i32.store (i32.const 36) (i32.const 36)) ;; iov.len
            (drop (call $fd_write (i32.const 2) (i32.const 32) (i32.const 1) (i32.const 40)))
            unreachable))))
    (i64.store (i32.const 1032) (i64.const -1))
    (i32.store (i32.const 1040) (i32.load (i32.const 0))) ;; partition = count
    (i32.store (i32.const 1044) (i32.const 0))
    (drop (call $emit (i32.const 1024) (local.get $n)))
    (i32.const 0))
)
