;; forbiddenimport: imports env.foo, a function the host does not provide
;; in a module it does not allow.
(module
  (import "env" "foo" (func $foo))
  (memory (export "memory") 1)
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32) (i32.const 1024))
  (func (export "wasmstream_process") (param $n i32) (result i32) (call $foo) (i32.const 0))
)
