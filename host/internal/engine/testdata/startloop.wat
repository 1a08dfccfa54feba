;; startloop: the module's start function never returns. Without the
;; engine's start hoisting it would hang InstantiateModule forever.
(module
  (memory (export "memory") 1)
  (func $start (loop $l (br $l)))
  (start $start)
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32) (i32.const 1024))
  (func (export "wasmstream_process") (param $n i32) (result i32) (i32.const 0))
)
