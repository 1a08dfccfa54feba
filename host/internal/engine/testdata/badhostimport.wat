;; badhostimport: imports wasmstream.emit with the wrong signature,
;; wasmstream.open_socket (no such host function) and a WASI function that
;; does not exist.
(module
  (import "wasmstream" "emit" (func $emit (param i64) (result i32)))
  (import "wasmstream" "open_socket" (func $sock (result i32)))
  (import "wasi_snapshot_preview1" "sock_connect" (func $conn (result i32)))
  (memory (export "memory") 1)
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32) (i32.const 1024))
  (func (export "wasmstream_process") (param $n i32) (result i32) (i32.const 0))
)
