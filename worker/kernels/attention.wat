;; Decode-step attention over one sequence's KV cache, in WebAssembly SIMD (f32x4).
;;
;; Why hand-written: tfjs has no kernel for "one query row per head over a cache that grows by a row per step", and
;; the same loop in JavaScript runs scalar (about 1 GFLOP/s); it was the part of a batched decode step that grew
;; with every added sequence, and at long contexts it is most of the step.
;;
;; Layout (byte offsets into the imported memory; every vector is a head padded to `hdp` floats, hdp % 16 == 0, so
;; the inner loops take 16 floats (four vectors) per turn):
;;   q      [H, hdp]          the new position's queries (normalised and rotated)
;;   k, v   paged: position t is slot t & (2^shift − 1) of page t >> shift; pages are `pageBytes` apart and the
;;          slots of one page hold consecutive [KVH, hdp] rows, so a page's keys (values) are read as one stream
;;   scores [H, len]          scratch
;;   out    [H, hdp]          Σ_t exp(s_t − m) · v_t, divided by the sum when `normalize` is 1; chunks of one cache
;;                            leave it undivided and are combined by the caller
;;   stats  [H, 2]            per head: m = max_t s_t, and Σ_t exp(s_t − m)
;; Query head h reads key/value head h / rep (grouped-query attention); s_t = scale · q·k_t.
;; Build: npm run build:kernels (writes attention-wasm.ts).
(module
  (import "env" "memory" (memory 1))

  ;; e^x for x ≤ 0, four lanes: x = n·ln2 + r with |r| ≤ ln2/2, e^r by a degree-7 polynomial (relative error
  ;; about 1e-7), 2^n by building the float's exponent. x is clamped at −87 so 2^n stays a normal float.
  (func $exp4 (param $x v128) (result v128)
    (local $n v128) (local $r v128) (local $p v128)
    (local.set $x (f32x4.max (local.get $x) (v128.const f32x4 -87 -87 -87 -87)))
    (local.set $n (f32x4.nearest (f32x4.mul (local.get $x) (v128.const f32x4 1.44269504 1.44269504 1.44269504 1.44269504))))
    (local.set $r
      (f32x4.sub
        (f32x4.sub (local.get $x) (f32x4.mul (local.get $n) (v128.const f32x4 0.693359375 0.693359375 0.693359375 0.693359375)))
        (f32x4.mul (local.get $n) (v128.const f32x4 -2.12194440e-4 -2.12194440e-4 -2.12194440e-4 -2.12194440e-4))))
    (local.set $p (v128.const f32x4 1.9875691500e-4 1.9875691500e-4 1.9875691500e-4 1.9875691500e-4))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (v128.const f32x4 1.3981999507e-3 1.3981999507e-3 1.3981999507e-3 1.3981999507e-3)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (v128.const f32x4 8.3334519073e-3 8.3334519073e-3 8.3334519073e-3 8.3334519073e-3)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (v128.const f32x4 4.1665795894e-2 4.1665795894e-2 4.1665795894e-2 4.1665795894e-2)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (v128.const f32x4 1.6666665459e-1 1.6666665459e-1 1.6666665459e-1 1.6666665459e-1)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (v128.const f32x4 5.0000001201e-1 5.0000001201e-1 5.0000001201e-1 5.0000001201e-1)))
    (local.set $p
      (f32x4.add
        (f32x4.add (f32x4.mul (local.get $p) (f32x4.mul (local.get $r) (local.get $r))) (local.get $r))
        (v128.const f32x4 1 1 1 1)))
    (f32x4.mul
      (local.get $p)
      (i32x4.shl (i32x4.add (i32x4.trunc_sat_f32x4_s (local.get $n)) (v128.const i32x4 127 127 127 127)) (i32.const 23))))

  (func $hsum (param $v v128) (result f32)
    (f32.add
      (f32.add (f32x4.extract_lane 0 (local.get $v)) (f32x4.extract_lane 1 (local.get $v)))
      (f32.add (f32x4.extract_lane 2 (local.get $v)) (f32x4.extract_lane 3 (local.get $v)))))

  (func (export "attend")
    (param $q i32) (param $out i32) (param $stats i32) (param $scores i32) (param $k i32) (param $v i32)
    (param $len i32) (param $shift i32) (param $pageBytes i32) (param $kvh i32) (param $rep i32) (param $hdp i32)
    (param $scale f32) (param $normalize i32)
    (local $hdBytes i32) (local $rowBytes i32) (local $lenBytes i32) (local $len4 i32) (local $heads i32) (local $slotMask i32)
    (local $t i32) (local $g i32) (local $r i32) (local $h i32) (local $d i32)
    (local $row i32) (local $kg i32) (local $qRow i32) (local $sRow i32) (local $oRow i32) (local $addr i32) (local $a i32) (local $b i32)
    (local $acc v128) (local $sum v128) (local $p v128) (local $mx v128)
    (local $max f32) (local $e f32) (local $total f32)
    (local.set $hdBytes (i32.shl (local.get $hdp) (i32.const 2)))
    (local.set $rowBytes (i32.mul (local.get $kvh) (local.get $hdBytes)))
    (local.set $heads (i32.mul (local.get $kvh) (local.get $rep)))
    (local.set $lenBytes (i32.shl (local.get $len) (i32.const 2)))
    (local.set $len4 (i32.and (local.get $len) (i32.const -4)))
    (local.set $slotMask (i32.sub (i32.shl (i32.const 1) (local.get $shift)) (i32.const 1)))

    ;; scores[h, t] = scale · q_h · k_t,h/rep — position by position, so each key row is one contiguous read
    (local.set $t (i32.const 0))
    (block $scoresDone
      (loop $scoresT
        (br_if $scoresDone (i32.ge_u (local.get $t) (local.get $len)))
        (local.set $row
          (i32.add
            (i32.add (local.get $k) (i32.mul (i32.shr_u (local.get $t) (local.get $shift)) (local.get $pageBytes)))
            (i32.mul (i32.and (local.get $t) (local.get $slotMask)) (local.get $rowBytes))))
        (local.set $h (i32.const 0))
        (local.set $g (i32.const 0))
        (block $groupsDone
          (loop $groups
            (br_if $groupsDone (i32.ge_u (local.get $g) (local.get $kvh)))
            (local.set $kg (i32.add (local.get $row) (i32.mul (local.get $g) (local.get $hdBytes))))
            (local.set $r (i32.const 0))
            (block $headsDone
              (loop $heads
                (br_if $headsDone (i32.ge_u (local.get $r) (local.get $rep)))
                (local.set $qRow (i32.add (local.get $q) (i32.mul (local.get $h) (local.get $hdBytes))))
                (local.set $acc (v128.const f32x4 0 0 0 0))
                (local.set $d (i32.const 0))
                (block $dotDone
                  (loop $dot
                    (br_if $dotDone (i32.ge_u (local.get $d) (local.get $hdBytes)))
                    (local.set $a (i32.add (local.get $qRow) (local.get $d)))
                    (local.set $b (i32.add (local.get $kg) (local.get $d)))
                    (local.set $acc
                      (f32x4.add
                        (f32x4.add
                          (f32x4.add (local.get $acc) (f32x4.mul (v128.load (local.get $a)) (v128.load (local.get $b))))
                          (f32x4.mul (v128.load offset=16 (local.get $a)) (v128.load offset=16 (local.get $b))))
                        (f32x4.add
                          (f32x4.mul (v128.load offset=32 (local.get $a)) (v128.load offset=32 (local.get $b)))
                          (f32x4.mul (v128.load offset=48 (local.get $a)) (v128.load offset=48 (local.get $b))))))
                    (local.set $d (i32.add (local.get $d) (i32.const 64)))
                    (br $dot)))
                (f32.store
                  (i32.add (local.get $scores) (i32.add (i32.mul (local.get $h) (local.get $lenBytes)) (i32.shl (local.get $t) (i32.const 2))))
                  (f32.mul (call $hsum (local.get $acc)) (local.get $scale)))
                (local.set $h (i32.add (local.get $h) (i32.const 1)))
                (local.set $r (i32.add (local.get $r) (i32.const 1)))
                (br $heads)))
            (local.set $g (i32.add (local.get $g) (i32.const 1)))
            (br $groups)))
        (local.set $t (i32.add (local.get $t) (i32.const 1)))
        (br $scoresT)))

    ;; per head: m = max, scores ← exp(s − m) in place, stats = (m, Σ)
    (local.set $h (i32.const 0))
    (block $softmaxDone
      (loop $softmax
        (br_if $softmaxDone (i32.ge_u (local.get $h) (local.get $heads)))
        (local.set $sRow (i32.add (local.get $scores) (i32.mul (local.get $h) (local.get $lenBytes))))
        (local.set $max (f32.const -inf))
        (local.set $t (i32.const 0))
        (block $maxDone
          (loop $maxT
            (br_if $maxDone (i32.ge_u (local.get $t) (local.get $len)))
            (local.set $max (f32.max (local.get $max) (f32.load (i32.add (local.get $sRow) (i32.shl (local.get $t) (i32.const 2))))))
            (local.set $t (i32.add (local.get $t) (i32.const 1)))
            (br $maxT)))
        (local.set $mx (f32x4.splat (local.get $max)))
        (local.set $sum (v128.const f32x4 0 0 0 0))
        (local.set $t (i32.const 0))
        (block $expDone
          (loop $expT
            (br_if $expDone (i32.ge_u (local.get $t) (local.get $len4)))
            (local.set $addr (i32.add (local.get $sRow) (i32.shl (local.get $t) (i32.const 2))))
            (local.set $p (call $exp4 (f32x4.sub (v128.load (local.get $addr)) (local.get $mx))))
            (v128.store (local.get $addr) (local.get $p))
            (local.set $sum (f32x4.add (local.get $sum) (local.get $p)))
            (local.set $t (i32.add (local.get $t) (i32.const 4)))
            (br $expT)))
        (local.set $total (call $hsum (local.get $sum)))
        (block $tailDone
          (loop $tail
            (br_if $tailDone (i32.ge_u (local.get $t) (local.get $len)))
            (local.set $addr (i32.add (local.get $sRow) (i32.shl (local.get $t) (i32.const 2))))
            (local.set $e
              (f32x4.extract_lane 0 (call $exp4 (f32x4.splat (f32.sub (f32.load (local.get $addr)) (local.get $max))))))
            (f32.store (local.get $addr) (local.get $e))
            (local.set $total (f32.add (local.get $total) (local.get $e)))
            (local.set $t (i32.add (local.get $t) (i32.const 1)))
            (br $tail)))
        (local.set $addr (i32.add (local.get $stats) (i32.shl (local.get $h) (i32.const 3))))
        (f32.store (local.get $addr) (local.get $max))
        (f32.store offset=4 (local.get $addr) (local.get $total))
        (local.set $h (i32.add (local.get $h) (i32.const 1)))
        (br $softmax)))

    ;; out = 0, then Σ_t p_h,t · v_t,h/rep — again position by position over contiguous value rows
    (local.set $d (i32.const 0))
    (block $zeroDone
      (loop $zero
        (br_if $zeroDone (i32.ge_u (local.get $d) (i32.mul (local.get $heads) (local.get $hdBytes))))
        (v128.store (i32.add (local.get $out) (local.get $d)) (v128.const f32x4 0 0 0 0))
        (local.set $d (i32.add (local.get $d) (i32.const 16)))
        (br $zero)))
    (local.set $t (i32.const 0))
    (block $valuesDone
      (loop $valuesT
        (br_if $valuesDone (i32.ge_u (local.get $t) (local.get $len)))
        (local.set $row
          (i32.add
            (i32.add (local.get $v) (i32.mul (i32.shr_u (local.get $t) (local.get $shift)) (local.get $pageBytes)))
            (i32.mul (i32.and (local.get $t) (local.get $slotMask)) (local.get $rowBytes))))
        (local.set $h (i32.const 0))
        (local.set $g (i32.const 0))
        (block $vGroupsDone
          (loop $vGroups
            (br_if $vGroupsDone (i32.ge_u (local.get $g) (local.get $kvh)))
            (local.set $kg (i32.add (local.get $row) (i32.mul (local.get $g) (local.get $hdBytes))))
            (local.set $r (i32.const 0))
            (block $vHeadsDone
              (loop $vHeads
                (br_if $vHeadsDone (i32.ge_u (local.get $r) (local.get $rep)))
                (local.set $p
                  (v128.load32_splat
                    (i32.add (local.get $scores) (i32.add (i32.mul (local.get $h) (local.get $lenBytes)) (i32.shl (local.get $t) (i32.const 2))))))
                (local.set $oRow (i32.add (local.get $out) (i32.mul (local.get $h) (local.get $hdBytes))))
                (local.set $d (i32.const 0))
                (block $axpyDone
                  (loop $axpy
                    (br_if $axpyDone (i32.ge_u (local.get $d) (local.get $hdBytes)))
                    (local.set $a (i32.add (local.get $oRow) (local.get $d)))
                    (local.set $b (i32.add (local.get $kg) (local.get $d)))
                    (v128.store (local.get $a) (f32x4.add (v128.load (local.get $a)) (f32x4.mul (local.get $p) (v128.load (local.get $b)))))
                    (v128.store offset=16 (local.get $a)
                      (f32x4.add (v128.load offset=16 (local.get $a)) (f32x4.mul (local.get $p) (v128.load offset=16 (local.get $b)))))
                    (v128.store offset=32 (local.get $a)
                      (f32x4.add (v128.load offset=32 (local.get $a)) (f32x4.mul (local.get $p) (v128.load offset=32 (local.get $b)))))
                    (v128.store offset=48 (local.get $a)
                      (f32x4.add (v128.load offset=48 (local.get $a)) (f32x4.mul (local.get $p) (v128.load offset=48 (local.get $b)))))
                    (local.set $d (i32.add (local.get $d) (i32.const 64)))
                    (br $axpy)))
                (local.set $h (i32.add (local.get $h) (i32.const 1)))
                (local.set $r (i32.add (local.get $r) (i32.const 1)))
                (br $vHeads)))
            (local.set $g (i32.add (local.get $g) (i32.const 1)))
            (br $vGroups)))
        (local.set $t (i32.add (local.get $t) (i32.const 1)))
        (br $valuesT)))

    ;; out rows ÷ their sums
    (if (local.get $normalize)
      (then
        (local.set $h (i32.const 0))
        (block $normDone
          (loop $norm
            (br_if $normDone (i32.ge_u (local.get $h) (local.get $heads)))
            (local.set $p
              (f32x4.splat (f32.div (f32.const 1) (f32.load offset=4 (i32.add (local.get $stats) (i32.shl (local.get $h) (i32.const 3)))))))
            (local.set $oRow (i32.add (local.get $out) (i32.mul (local.get $h) (local.get $hdBytes))))
            (local.set $d (i32.const 0))
            (block $scaleDone
              (loop $scaleRow
                (br_if $scaleDone (i32.ge_u (local.get $d) (local.get $hdBytes)))
                (local.set $addr (i32.add (local.get $oRow) (local.get $d)))
                (v128.store (local.get $addr) (f32x4.mul (v128.load (local.get $addr)) (local.get $p)))
                (local.set $d (i32.add (local.get $d) (i32.const 16)))
                (br $scaleRow)))
            (local.set $h (i32.add (local.get $h) (i32.const 1)))
            (br $norm))))))
)
