;; badtimeimport: time imports with wrong signatures (ts as an i32; an i32
;; result for time_now); all refused at load time, each named.
(module
  (import "wasmstream" "timer_set" (func (param i32 i32 i32 i32) (result i32)))
  (import "wasmstream" "time_now" (func (param i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmstream_process") (param i32) (result i32) (i32.const 0))
  (func (export "wasmstream_on_timer") (param i32) (result i32) (i32.const 0)))
