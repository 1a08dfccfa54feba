;; memburst: an instance that touches its whole memory (host/neighbour_test.go).
;; It declares 64 MiB (1024 pages, the default limits.memory) and every
;; record writes a non-zero byte into each of its 4 KiB pages, so that every
;; page is faulted in and dirtied: 32 tasks of it receiving a record at
;; once is a burst of 32 x 64 MiB of page faults. The input buffer at 1024
;; holds 4 KiB.
(module
  (memory (export "memory") 1024 1024)
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 4096)) (then (return (i32.const 0))))
    (i32.const 1024))
  (func (export "wasmstream_process") (param $n i32) (result i32)
    (local $p i32)
    (local.set $p (i32.const 8192))
    (loop $touch
      (i32.store8 (local.get $p) (i32.const 1))
      (local.set $p (i32.add (local.get $p) (i32.const 4096)))
      (br_if $touch (i32.lt_u (local.get $p) (i32.const 67108864))))
    (i32.const 0))
)
