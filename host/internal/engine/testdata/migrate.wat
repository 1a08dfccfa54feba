;; migrate: exports wasmstream_migrate (abi/ABI.md section 12). The host
;; writes the version ID to migrate from into the input buffer at 1024.
;; The migration stores it under key "from" in store 0, then tries to emit
;; and stores emit's result (EPHASE expected) under key "emit" as one
;; little-endian i32. A version ID of "fail" then returns FAILED; "trap"
;; traps; "loop" runs forever; "bloat" puts 64 KiB values under new keys
;; until state_put refuses one, then returns FAILED.
(module
  (import "wasmstream" "state_put" (func $put (param i32 i32 i32 i32 i32) (result i32)))
  (import "wasmstream" "emit" (func $emit (param i32 i32) (result i32)))
  (memory (export "memory") 4)
  (data (i32.const 0) "from")
  (data (i32.const 8) "emit")
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmstream_process") (param i32) (result i32) (i32.const 0))
  (func (export "wasmstream_migrate") (param $n i32) (result i32)
    (local $i i32)
    (drop (call $put (i32.const 0) (i32.const 0) (i32.const 4) (i32.const 1024) (local.get $n)))
    ;; emit a 36-byte empty record (any bytes: EPHASE comes first)
    (i32.store (i32.const 16) (call $emit (i32.const 65536) (i32.const 36)))
    (drop (call $put (i32.const 0) (i32.const 8) (i32.const 4) (i32.const 16) (i32.const 4)))
    (if (i32.eq (local.get $n) (i32.const 4))
      (then
        (if (i32.eq (i32.load (i32.const 1024)) (i32.const 0x6c696166)) ;; "fail"
          (then (return (i32.const 1))))
        (if (i32.eq (i32.load (i32.const 1024)) (i32.const 0x70617274)) ;; "trap"
          (then unreachable))
        (if (i32.eq (i32.load (i32.const 1024)) (i32.const 0x706f6f6c)) ;; "loop"
          (then (loop $l (br $l))))))
    (if (i32.eq (local.get $n) (i32.const 5))
      (then
        (loop $b
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (i32.store (i32.const 32) (local.get $i))
          (br_if $b (i32.eqz (call $put (i32.const 0) (i32.const 32) (i32.const 4) (i32.const 65536) (i32.const 65536)))))
        (return (i32.const 1))))
    (i32.const 0)))
