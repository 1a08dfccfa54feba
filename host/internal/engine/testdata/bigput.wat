;; bigput: each record does state_put(store 0, the record's key, N bytes of
;; memory at 65536), N being the record's 4-byte value read as a
;; little-endian u32 (a record whose value is not 4 bytes fails). The put's
;; result is ignored: whether the record fails is the host's decision. The
;; value bytes are zeros; the input buffer at 1024 holds 64 KiB.
(module
  (import "wasmstream" "state_put" (func $put (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 18)
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 65536)) (then (return (i32.const 0))))
    (i32.const 1024))
  (func (export "wasmstream_process") (param $n i32) (result i32)
    (local $kl i32)
    (local.set $kl (i32.load (i32.const 1048)))
    (if (i32.ne (i32.load (i32.const 1052)) (i32.const 4)) (then (return (i32.const 1))))
    (drop (call $put (i32.const 0) (i32.const 1060) (local.get $kl)
      (i32.const 65536) (i32.load (i32.add (i32.const 1060) (local.get $kl)))))
    (i32.const 0)))
