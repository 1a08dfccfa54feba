;; marknocommit: imports commit_mark but exports no wasmstream_on_commit
;; (refused at load time: its marks could never be delivered).
(module
  (import "wasmstream" "commit_mark" (func (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmstream_process") (param i32) (result i32) (i32.const 0))
  (func (export "wasmstream_on_timer") (param i32) (result i32) (i32.const 0)))
