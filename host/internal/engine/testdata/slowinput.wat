;; slowinput: wasmstream_input spins when asked for more than 4096 bytes
;; (the host asks again for a record that does not fit its buffer); a
;; small record goes through.
(module
  (memory (export "memory") 1)
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 4096))
      (then (loop $spin (br $spin))))
    (i32.const 1024))
  (func (export "wasmstream_process") (param $n i32) (result i32) (i32.const 0))
)
