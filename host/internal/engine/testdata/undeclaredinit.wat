;; undeclaredinit: wasmstream_init asks for the output "alerts", the store
;; "cards", then 26 one-letter outputs "a".."z" (a plugin asking for many
;; names; the engine remembers at most 16), and fails. The engine's error
;; carries the names the processor does not declare.
(module
  (import "wasmstream" "output_index" (func $output_index (param i32 i32) (result i32)))
  (import "wasmstream" "store_index" (func $store_index (param i32 i32) (result i32)))
  (import "wasmstream" "set_error" (func $set_error (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "alerts")
  (data (i32.const 32) "cards")
  (data (i32.const 48) "abcdefghijklmnopqrstuvwxyz")
  (data (i32.const 80) "undeclared")
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmstream_init") (result i32)
    (local $i i32)
    (drop (call $output_index (i32.const 16) (i32.const 6)))
    (drop (call $store_index (i32.const 32) (i32.const 5)))
    (loop $next
      (drop (call $output_index (i32.add (i32.const 48) (local.get $i)) (i32.const 1)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $next (i32.lt_u (local.get $i) (i32.const 26))))
    (drop (call $set_error (i32.const 80) (i32.const 10)))
    (i32.const 1))
  (func (export "wasmstream_process") (param i32) (result i32) (i32.const 0))
)
