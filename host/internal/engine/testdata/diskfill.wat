;; diskfill: fills the disk (host/smalldisk_test.go, host/disk_test.go). Each
;; record puts its value four times in store 0, under the record's key
;; followed by one byte 0..3: a test that gives it random values writes
;; four times their size of incompressible state per record. A put the host
;; refuses (ELIMIT past limits.state_disk) fails the record; so do a key
;; over 1000 bytes and a null key. The input buffer at 1024 holds 128 KiB.
(module
  (import "wasmstream" "state_put" (func $put (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 4)
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 131072)) (then (return (i32.const 0))))
    (i32.const 1024))
  (func (export "wasmstream_process") (param $n i32) (result i32)
    (local $kl i32) (local $i i32)
    (local.set $kl (i32.load (i32.const 1048)))
    (if (i32.gt_u (local.get $kl) (i32.const 1000)) (then (return (i32.const 1))))
    ;; the key, copied to 200000 with one byte of room after it
    (memory.copy (i32.const 200000) (i32.const 1060) (local.get $kl))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (i32.const 4)))
        (i32.store8 (i32.add (i32.const 200000) (local.get $kl)) (local.get $i))
        (if (call $put (i32.const 0) (i32.const 200000) (i32.add (local.get $kl) (i32.const 1))
              (i32.add (i32.const 1060) (local.get $kl)) (i32.load (i32.const 1052)))
          (then (return (i32.const 1))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i32.const 0)))
