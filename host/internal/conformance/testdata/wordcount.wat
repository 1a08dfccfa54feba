;; wordcount: the word count's floor for BenchmarkPolyglot, by hand in ABI
;; versions 1 and 2 (abi/ABI.md sections 3 and 10). A record's value is
;; split into words at ASCII spaces and control bytes (the benchmark's
;; lines are lowercase ASCII: no Unicode, no lowercasing, no words counted
;; twice in a line); per word it reads the count in store 0 (state_get,
;; 8 bytes big-endian), adds one, writes it back (state_put) and emits the
;; word with its count in decimal to output 0, built in place: with the emit import one at
;; a time, or staged as emit entries in an arena in a batch. The input
;; buffer is a fixed 1 MiB at 65536; the arena starts at 2 MiB and is reset
;; per batch, which returns early past 1 MiB of staged emits.
(module
  (import "wasmstream" "emit" (func $emit (param i32 i32) (result i32)))
  (import "wasmstream" "state_get" (func $state_get (param i32 i32 i32 i32 i32) (result i32)))
  (import "wasmstream" "state_put" (func $state_put (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 64)
  (global $staged (mut i32) (i32.const 0)) ;; 1 inside wasmstream_batch
  (global $arena (mut i32) (i32.const 2097152))
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_abi_version_2"))
  (func (export "wasmstream_input") (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 1048576)) (then (return (i32.const 0))))
    (i32.const 65536))

  ;; count writes the word's new count, in decimal, at $out and returns its
  ;; length. The store holds the count as 8 bytes big-endian (read into and
  ;; written from 2048), as the SDKs' word counts keep it.
  (func $count (param $w i32) (param $wl i32) (param $out i32) (result i32)
    (local $i i32) (local $c i64) (local $len i32)
    (if (i32.eq (call $state_get (i32.const 0) (local.get $w) (local.get $wl) (i32.const 2048) (i32.const 8)) (i32.const 8))
      (then (local.set $c (call $bswap (i64.load (i32.const 2048))))))
    (local.set $c (i64.add (local.get $c) (i64.const 1)))
    (i64.store (i32.const 2048) (call $bswap (local.get $c)))
    (drop (call $state_put (i32.const 0) (local.get $w) (local.get $wl) (i32.const 2048) (i32.const 8)))
    ;; the digits backwards at 2111 and down, then copied out in order
    (local.set $i (i32.const 2112))
    (loop $format
      (local.set $i (i32.sub (local.get $i) (i32.const 1)))
      (i32.store8 (local.get $i) (i32.add (i32.const 48) (i32.wrap_i64 (i64.rem_u (local.get $c) (i64.const 10)))))
      (local.set $c (i64.div_u (local.get $c) (i64.const 10)))
      (br_if $format (i64.ne (local.get $c) (i64.const 0))))
    (local.set $len (i32.sub (i32.const 2112) (local.get $i)))
    (memory.copy (local.get $out) (local.get $i) (local.get $len))
    (local.get $len))

  ;; bswap reverses the bytes of x.
  (func $bswap (param $x i64) (result i64)
    (local $r i64) (local $k i32)
    (loop $byte
      (local.set $r (i64.or (i64.shl (local.get $r) (i64.const 8)) (i64.and (local.get $x) (i64.const 255))))
      (local.set $x (i64.shr_u (local.get $x) (i64.const 8)))
      (local.set $k (i32.add (local.get $k) (i32.const 1)))
      (br_if $byte (i32.lt_u (local.get $k) (i32.const 8))))
    (local.get $r))

  ;; word counts one word [w, w+wl) of the record at r: its emit is built
  ;; at 4096 (the emit import) or in the arena (staged).
  (func $word (param $r i32) (param $w i32) (param $wl i32) (result i32)
    (local $d i32) (local $vl i32) (local $n i32)
    (local.set $d (i32.const 4096))
    (if (global.get $staged) (then (local.set $d (i32.add (global.get $arena) (i32.const 4)))))
    (i64.store (local.get $d) (i64.load (local.get $r)))              ;; the input's timestamp
    (i64.store offset=8 (local.get $d) (i64.const -1))               ;; offset
    (i32.store offset=16 (local.get $d) (i32.const -1))              ;; any partition
    (i32.store offset=20 (local.get $d) (i32.const 0))               ;; output 0
    (i32.store offset=24 (local.get $d) (local.get $wl))             ;; key: the word
    (i32.store offset=32 (local.get $d) (i32.const 0))               ;; no headers
    (memory.copy (i32.add (local.get $d) (i32.const 36)) (local.get $w) (local.get $wl))
    (local.set $vl (call $count (local.get $w) (local.get $wl) (i32.add (i32.add (local.get $d) (i32.const 36)) (local.get $wl))))
    (i32.store offset=28 (local.get $d) (local.get $vl))
    (local.set $n (i32.add (i32.const 36) (i32.add (local.get $wl) (local.get $vl))))
    (if (global.get $staged)
      (then
        (i32.store (global.get $arena) (local.get $n))
        (global.set $arena (i32.add (local.get $d) (local.get $n)))
        (return (i32.const 0))))
    (if (i32.lt_s (call $emit (local.get $d) (local.get $n)) (i32.const 0)) (then (return (i32.const 1))))
    (i32.const 0))

  ;; record counts the words of the value of the record at r; its status.
  (func $record (param $r i32) (result i32)
    (local $kl i32) (local $p i32) (local $end i32) (local $w i32)
    (local.set $kl (i32.load offset=24 (local.get $r)))
    (if (i32.lt_s (local.get $kl) (i32.const 0)) (then (local.set $kl (i32.const 0))))
    (local.set $p (i32.add (i32.add (local.get $r) (i32.const 36)) (local.get $kl)))
    (if (i32.lt_s (i32.load offset=28 (local.get $r)) (i32.const 0)) (then (return (i32.const 0))))
    (local.set $end (i32.add (local.get $p) (i32.load offset=28 (local.get $r))))
    (block $done
      (loop $next
        ;; skip separators
        (block $start
          (loop $skip
            (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
            (br_if $start (i32.gt_u (i32.load8_u (local.get $p)) (i32.const 32)))
            (local.set $p (i32.add (local.get $p) (i32.const 1)))
            (br $skip)))
        (local.set $w (local.get $p))
        (block $wend
          (loop $in
            (br_if $wend (i32.ge_u (local.get $p) (local.get $end)))
            (br_if $wend (i32.le_u (i32.load8_u (local.get $p)) (i32.const 32)))
            (local.set $p (i32.add (local.get $p) (i32.const 1)))
            (br $in)))
        (if (call $word (local.get $r) (local.get $w) (i32.sub (local.get $p) (local.get $w)))
          (then (return (i32.const 1))))
        (br $next)))
    (i32.const 0))

  (func (export "wasmstream_process") (param $n i32) (result i32)
    (global.set $staged (i32.const 0))
    (call $record (i32.const 65536)))

  (func (export "wasmstream_batch") (param $len i32) (result i32)
    (local $count i32) (local $i i32) (local $s i32) (local $st i32) (local $from i32)
    (local.set $count (i32.load (i32.const 65536)))
    (local.set $s (i32.const 65552))
    (global.set $staged (i32.const 1))
    (global.set $arena (i32.const 2097152))
    (block $out
      (loop $slot
        (br_if $out (i32.ge_u (local.get $i) (local.get $count)))
        (local.set $from (global.get $arena))
        (local.set $st (call $record (i32.add (local.get $s) (i32.const 24))))
        (i32.store offset=4 (local.get $s) (local.get $st))
        (i32.store offset=8 (local.get $s) (local.get $from))
        (i32.store offset=12 (local.get $s) (i32.sub (global.get $arena) (local.get $from)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (i32.store (i32.const 65540) (local.get $i))                        ;; done
        (br_if $out (local.get $st))
        (br_if $out (i32.load (i32.const 65544)))                            ;; stop
        (br_if $out (i32.gt_u (global.get $arena) (i32.const 3145728)))     ;; 1 MiB staged
        (local.set $s (i32.add (local.get $s)
          (i32.and (i32.add (i32.add (i32.load offset=20 (local.get $s)) (i32.const 24)) (i32.const 7)) (i32.const -8))))
        (br $slot)))
    (global.set $staged (i32.const 0))
    (i32.const 0))
)
