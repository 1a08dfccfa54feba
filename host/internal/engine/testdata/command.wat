;; command: a WASI command module, as a Go plugin built without
;; -buildmode=c-shared is: it exports _start (which the host never calls)
;; and no _initialize, so its runtime is not started and its first export
;; traps (Go's says "call _start first"). The engine's error says how to
;; build it instead.
(module
  (memory (export "memory") 1)
  (func (export "_start"))
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmstream_init") (result i32) unreachable)
  (func (export "wasmstream_process") (param i32) (result i32) (i32.const 0))
)
