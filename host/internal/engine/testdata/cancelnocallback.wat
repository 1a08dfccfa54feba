;; cancelnocallback: imports timer_cancel (only) but exports no
;; wasmstream_on_timer (refused at load time).
(module
  (import "wasmstream" "timer_cancel" (func (param i32 i64 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmstream_process") (param i32) (result i32) (i32.const 0))
  (func (export "wasmstream_on_commit") (param i32) (result i32) (i32.const 0)))
