;; membomb: grows memory one page at a time until memory.grow fails. Key
;; "soft" then returns StatusOK (it handled the failure: the record stands);
;; anything else then hits unreachable.
(module
  (memory (export "memory") 2)
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 65536)) (then (return (i32.const 0))))
    (i32.const 1024))
  (func (export "wasmstream_process") (param $n i32) (result i32)
    (block $full
      (loop $grow
        (br_if $full (i32.eq (memory.grow (i32.const 1)) (i32.const -1)))
        (br $grow)))
    (if (i32.eq (i32.load (i32.const 1048)) (i32.const 4))
      (then (if (i32.eq (i32.load (i32.const 1060)) (i32.const 0x74666f73)) ;; "soft"
        (then (return (i32.const 0))))))
    unreachable)
)
