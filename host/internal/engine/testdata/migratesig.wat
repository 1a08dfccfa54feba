;; migratesig: exports wasmstream_migrate with a wrong signature (a pointer
;; and a length, where the ABI hands the version ID in the input buffer).
(module
  (memory (export "memory") 1)
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param i32) (result i32) (i32.const 1024))
  (func (export "wasmstream_process") (param i32) (result i32) (i32.const 0))
  (func (export "wasmstream_migrate") (param i32 i32) (result i32) (i32.const 0)))
