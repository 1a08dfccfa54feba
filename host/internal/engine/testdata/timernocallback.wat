;; timernocallback: imports timer_set but exports no wasmstream_on_timer
;; (refused at load time: its timers could never fire).
(module
  (import "wasmstream" "timer_set" (func (param i32 i64 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmstream_process") (param i32) (result i32) (i32.const 0)))
