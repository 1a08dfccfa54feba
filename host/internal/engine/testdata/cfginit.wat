;; cfginit: wasmstream_init reads the processor config; when it starts with
;; "x" init fails (set_error + StatusFailed), when it starts with "f" init
;; calls config with a buffer outside memory (and ignores the error). Every
;; record traps. Tests use it to make a (re-)instantiation fail. It has a
;; function (never called) that writes a table, so the engine does not
;; snapshot it: its replacements after a trap run init again.
(module
  (import "wasmstream" "config" (func $config (param i32 i32) (result i32)))
  (import "wasmstream" "set_error" (func $set_error (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (table $t 1 funcref)
  (func $settable (table.set $t (i32.const 0) (ref.null func)))
  (data (i32.const 16) "config says fail")
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 4096)) (then (return (i32.const 0))))
    (i32.const 1024))
  (func (export "wasmstream_init") (result i32)
    (if (i32.gt_s (call $config (i32.const 64) (i32.const 16)) (i32.const 0))
      (then
        (if (i32.eq (i32.load8_u (i32.const 64)) (i32.const 0x78)) ;; "x"
          (then
            (drop (call $set_error (i32.const 16) (i32.const 16)))
            (return (i32.const 1))))
        (if (i32.eq (i32.load8_u (i32.const 64)) (i32.const 0x66)) ;; "f"
          (then (drop (call $config (i32.const 0xfffffff0) (i32.const 100)))))))
    (i32.const 0))
  (func (export "wasmstream_process") (param $n i32) (result i32) unreachable)
)
