;; opcodes: exercises instructions with every kind of immediate (block
;; types, branch tables, memargs, constants, the 0xFC and 0xFD prefixes,
;; tables and references) so that a test can run the original and the
;; instrumented binary side by side and compare their results.
(module
  (type $binop (func (param i32 i32) (result i32)))
  (type $pair (func (param i32) (result i32 i32)))
  (memory (export "memory") 1)
  (table $t 4 funcref)
  (table $ext 2 externref)
  (global $g (mut i64) (i64.const 7))
  (global $c i32 (i32.const 3))
  (elem $e (table $t) (i32.const 0) func $add $sub)
  (elem $passive func $add $sub)
  (data $d (i32.const 100) "\01\02\03\04\05\06\07\08\09\0a\0b\0c\0d\0e\0f\10")
  (data $pd "passive-data")
  (func $add (type $binop) (i32.add (local.get 0) (local.get 1)))
  (func $sub (type $binop) (i32.sub (local.get 0) (local.get 1)))
  (func $split (type $pair) (i32.and (local.get 0) (i32.const 0xff)) (i32.shr_u (local.get 0) (i32.const 8)))
  (func (export "wasmstream_abi_version_1"))
  (func (export "wasmstream_input") (param $n i32) (result i32)
    (if (i32.gt_u (local.get $n) (i32.const 4096)) (then (return (i32.const 0))))
    (i32.const 1024))
  (func (export "wasmstream_process") (param $n i32) (result i32) (i32.const 0))
  (func (export "run") (result i64)
    (local $acc i64) (local $i i32) (local $f f64) (local $v v128) (local $r externref)
    ;; loops with a block type and a br_table
    (loop $outer (result i32)
      (block $b2 (block $b1 (block $b0
        (br_table $b0 $b1 $b2 (i32.rem_u (local.get $i) (i32.const 3))))
        (local.set $acc (i64.add (local.get $acc) (i64.const 1))) (br $b2))
        (local.set $acc (i64.add (local.get $acc) (i64.const 10))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $outer (i32.lt_u (local.get $i) (i32.const 10)))
      (local.get $i))
    drop
    ;; multi-value block and call
    (i32.const 0x1234)
    (block $mv (param i32) (result i32 i32) (call $split))
    i32.add
    i64.extend_i32_u
    local.get $acc
    i64.add
    local.set $acc
    ;; call_indirect through the table
    (local.set $acc (i64.add (local.get $acc)
      (i64.extend_i32_s (call_indirect $t (type $binop) (i32.const 9) (i32.const 4) (i32.const 1)))))
    ;; typed select, globals, sign extension, conversions
    (local.set $acc (i64.add (local.get $acc)
      (select (result i64) (i64.const 5) (i64.const 6) (global.get $c))))
    (global.set $g (i64.mul (global.get $g) (i64.const 3)))
    (local.set $acc (i64.add (local.get $acc) (global.get $g)))
    (local.set $acc (i64.add (local.get $acc) (i64.extend8_s (i64.const 0x80))))
    (local.set $f (f64.add (f64.const 1.5) (f64.convert_i32_s (i32.const -4))))
    (local.set $acc (i64.add (local.get $acc) (i64.trunc_sat_f64_s (f64.mul (local.get $f) (f64.const 100)))))
    (local.set $acc (i64.add (local.get $acc) (i64.extend_i32_s (i32.trunc_sat_f32_u (f32.const 3.75)))))
    ;; memory: loads and stores with offsets and alignments
    (i64.store offset=8 align=4 (i32.const 200) (i64.const 0x0102030405060708))
    (i32.store16 offset=1 (i32.const 300) (i32.const 0xbeef))
    (local.set $acc (i64.add (local.get $acc) (i64.load32_u offset=12 (i32.const 200))))
    (local.set $acc (i64.add (local.get $acc) (i64.load16_s offset=1 align=1 (i32.const 300))))
    (local.set $acc (i64.add (local.get $acc) (i64.extend_i32_u (memory.size))))
    (drop (memory.grow (i32.const 0)))
    ;; bulk memory
    (memory.init $pd (i32.const 400) (i32.const 0) (i32.const 12))
    (data.drop $pd)
    (memory.copy (i32.const 420) (i32.const 400) (i32.const 12))
    (memory.fill (i32.const 440) (i32.const 0x41) (i32.const 4))
    (local.set $acc (i64.add (local.get $acc) (i64.load (i32.const 420))))
    (local.set $acc (i64.add (local.get $acc) (i64.load32_u (i32.const 440))))
    ;; tables and references
    (table.init $t $passive (i32.const 2) (i32.const 0) (i32.const 2))
    (elem.drop $passive)
    (table.copy $t $t (i32.const 0) (i32.const 2) (i32.const 1))
    (table.set $t (i32.const 1) (ref.func $sub))
    (drop (table.grow $t (ref.null func) (i32.const 1)))
    (table.fill $t (i32.const 4) (ref.null func) (i32.const 1))
    (local.set $acc (i64.add (local.get $acc) (i64.extend_i32_u (table.size $t))))
    (local.set $acc (i64.add (local.get $acc) (i64.extend_i32_u (ref.is_null (table.get $t (i32.const 4))))))
    (table.set $ext (i32.const 0) (local.get $r))
    (local.set $acc (i64.add (local.get $acc) (i64.extend_i32_u (ref.is_null (table.get $ext (i32.const 0))))))
    (local.set $acc (i64.add (local.get $acc)
      (i64.extend_i32_s (call_indirect $t (type $binop) (i32.const 20) (i32.const 5) (i32.const 1)))))
    ;; SIMD: const, shuffle, lanes, load/store lane, load zero, splat
    (local.set $v (v128.const i32x4 1 2 3 4))
    (local.set $v (i32x4.add (local.get $v) (i32x4.splat (i32.const 10))))
    (local.set $v (i8x16.shuffle 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 (local.get $v) (local.get $v)))
    (local.set $v (i32x4.replace_lane 3 (local.get $v) (i32.const 100)))
    (local.set $acc (i64.add (local.get $acc) (i64.extend_i32_s (i32x4.extract_lane 3 (local.get $v)))))
    (local.set $acc (i64.add (local.get $acc) (i64.extend_i32_s (i8x16.extract_lane_u 0 (local.get $v)))))
    (v128.store offset=16 (i32.const 500) (local.get $v))
    (local.set $v (v128.load32_zero (i32.const 100)))
    (local.set $v (v128.load8_lane 5 (i32.const 104) (local.get $v)))
    (v128.store64_lane 0 (i32.const 600) (local.get $v))
    (local.set $acc (i64.add (local.get $acc) (i64.load (i32.const 600))))
    (local.set $acc (i64.add (local.get $acc) (i64x2.extract_lane 1 (v128.load offset=16 (i32.const 500)))))
    (local.set $acc (i64.add (local.get $acc) (i64.extend_i32_u (i32x4.all_true (i32x4.splat (i32.const 1))))))
    ;; if/else with a result, nested loop with br_if out
    (local.set $i (i32.const 0))
    (block $exit
      (loop $l
        (local.set $acc (if (result i64) (i32.and (local.get $i) (i32.const 1))
          (then (i64.add (local.get $acc) (i64.const 3)))
          (else (i64.sub (local.get $acc) (i64.const 1)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br_if $exit (i32.ge_u (local.get $i) (i32.const 7)))
        (br $l)))
    (local.get $acc))
)
