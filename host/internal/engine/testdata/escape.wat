;; escape: an invalid module (compile with wat2wasm --no-check) that writes
;; global 0 although it defines no global. After instrumentation global 0 is
;; the interrupt flag: without the engine's index check the plugin could
;; clear the flag inside its loop and never be interrupted.
(module
  (memory (export "memory") 1)
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32) (i32.const 1024))
  (func (export "wasmstream_process") (param $n i32) (result i32)
    (loop $l (global.set 0 (i32.const 0)) (br $l))
    (i32.const 0))
)
