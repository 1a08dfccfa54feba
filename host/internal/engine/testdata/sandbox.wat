;; sandbox: probes the WASI sandbox and emits what it saw as one record on
;; output 0 whose value is (little-endian):
;;    0 u32 argc             4 u32 argv buffer size
;;    8 u32 environ count   12 u32 environ buffer size
;;   16 u32 errno of path_open(fd 3, "etc/passwd")
;;   20 u32 errno of fd_prestat_get(3)
;;   24 u64 realtime #1     32 u64 realtime #2
;;   40 u64 monotonic #1    48 u64 monotonic #2
;;   56 16 bytes from random_get
;;   72 u32 errno of fd_read(stdin)   76 u32 bytes read
;;   80 u32 errno of fd_write(stdout, "hello from the sandbox\n")
(module
  (import "wasi_snapshot_preview1" "args_sizes_get" (func $args_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_sizes_get" (func $environ_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_open" (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_prestat_get" (func $fd_prestat_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock_time_get (param i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "random_get" (func $random_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasmstream" "emit" (func $emit (param i32 i32) (result i32)))
  (memory (export "memory") 2)
  (data (i32.const 512) "etc/passwd")
  (data (i32.const 600) "hello from the sandbox\n")
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 65536)) (then (return (i32.const 0))))
    (i32.const 1024))
  (func (export "wasmstream_process") (param $n i32) (result i32)
    (drop (call $args_sizes_get (i32.const 70036) (i32.const 70040)))
    (drop (call $environ_sizes_get (i32.const 70044) (i32.const 70048)))
    (i32.store (i32.const 70052)
      (call $path_open (i32.const 3) (i32.const 0) (i32.const 512) (i32.const 10)
        (i32.const 0) (i64.const 2) (i64.const 0) (i32.const 0) (i32.const 300)))
    (i32.store (i32.const 70056) (call $fd_prestat_get (i32.const 3) (i32.const 320)))
    (drop (call $clock_time_get (i32.const 0) (i64.const 1) (i32.const 70060)))
    (drop (call $clock_time_get (i32.const 0) (i64.const 1) (i32.const 70068)))
    (drop (call $clock_time_get (i32.const 1) (i64.const 1) (i32.const 70076)))
    (drop (call $clock_time_get (i32.const 1) (i64.const 1) (i32.const 70084)))
    (drop (call $random_get (i32.const 70092) (i32.const 16)))
    (i32.store (i32.const 340) (i32.const 400)) ;; iov for fd_read
    (i32.store (i32.const 344) (i32.const 16))
    (i32.store (i32.const 70108) (call $fd_read (i32.const 0) (i32.const 340) (i32.const 1) (i32.const 70112)))
    (i32.store (i32.const 360) (i32.const 600)) ;; iov for fd_write
    (i32.store (i32.const 364) (i32.const 23))
    (i32.store (i32.const 70116) (call $fd_write (i32.const 1) (i32.const 360) (i32.const 1) (i32.const 380)))
    ;; the record header at 70000
    (i64.store (i32.const 70000) (i64.const 0))
    (i64.store (i32.const 70008) (i64.const -1))
    (i32.store (i32.const 70016) (i32.const -1))
    (i32.store (i32.const 70020) (i32.const 0))
    (i32.store (i32.const 70024) (i32.const -1))
    (i32.store (i32.const 70028) (i32.const 84))
    (i32.store (i32.const 70032) (i32.const 0))
    (drop (call $emit (i32.const 70000) (i32.const 120)))
    (i32.const 0))
)
