// RUN: flexsn-opt %s --split-input-file --flexsn-fuse-producers=remarks=true \
// RUN:   -verify-diagnostics | FileCheck %s

// flexsn-fuse-producers moves elementwise linalg producers of scan inputs
// into the scan. Fused cases first (no remark), then the refusals, each with
// the remark saying why.

// Batch-norm's apply step on an f16 input, feeding a scan that calls a
// neuron: the scan gets an inline body applying it; x is its input, scale
// and shift, which do not depend on t, its per-channel params; the
// extension to f32 is gone (the scan reads x as f32).
// CHECK-DAG:   #[[$SEQ:.+]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG:   #[[$CHAN:.+]] = affine_map<(d0, d1, d2) -> (d1)>
// CHECK-DAG:   #[[$NEURON:.+]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-LABEL: func.func @batch_norm
// CHECK-SAME:    (%[[X:[^:]+]]: tensor<?x?x?xf16>, %[[A:[^:]+]]: tensor<?xf32>, %[[B:[^:]+]]: tensor<?xf32>
// CHECK-NOT:     linalg.generic
// CHECK:         %[[R:.*]]:2 = flexsn.scan ins(%[[X]] : tensor<?x?x?xf16>) params(%[[A]], %[[B]] : tensor<?xf32>, tensor<?xf32>)
// CHECK-SAME:      indexing_maps = [#[[$SEQ]], #[[$CHAN]], #[[$CHAN]], #[[$SEQ]], #[[$NEURON]]] {
// CHECK-NEXT:    ^bb0(%[[XI:[^:]*]]: f32, %[[V:[^:]*]]: f32, %[[AC:[^:]*]]: f32, %[[BC:[^:]*]]: f32):
// CHECK-NOT:       arith.extf
// CHECK-NEXT:      %[[M:.*]] = arith.mulf %[[XI]], %[[AC]] : f32
// CHECK-NEXT:      %[[Y:.*]] = arith.addf %[[M]], %[[BC]] : f32
// CHECK-NEXT:      %[[S:.*]]:2 = flexsn.apply @lif(%[[Y]], %[[V]], %{{.*}}) : (f32, f32, f32) -> (f32, f32)
// CHECK-NEXT:      flexsn.yield %[[S]]#0, %[[S]]#1 : f32, f32
// CHECK:         return %[[R]]#0, %[[R]]#1
flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(spike)
    params(%tau: f32 = 2.0) {
  %h = arith.divf %x, %tau : f32
  %s = flexsn.spike %h surrogate(#flexsn.sigmoid<alpha = 4.0>) : f32
  flexsn.yield %s, %h : f32, f32
}

#seq = affine_map<(t, c, n) -> (t, c, n)>
#chan = affine_map<(t, c, n) -> (c)>
func.func @batch_norm(%x: tensor<?x?x?xf16>, %scale: tensor<?xf32>,
                      %shift: tensor<?xf32>, %e: tensor<?x?x?xf32>,
                      %ev: tensor<?x?xf32>)
    -> (tensor<?x?x?xf32>, tensor<?x?xf32>) {
  %y = linalg.generic {indexing_maps = [#seq, #chan, #chan, #seq],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %scale, %shift : tensor<?x?x?xf16>, tensor<?xf32>, tensor<?xf32>)
      outs(%e : tensor<?x?x?xf32>) {
  ^bb0(%xi: f16, %a: f32, %b: f32, %out: f32):
    %xf = arith.extf %xi : f16 to f32
    %m = arith.mulf %xf, %a : f32
    %r = arith.addf %m, %b : f32
    linalg.yield %r : f32
  } -> tensor<?x?x?xf32>
  %s, %v = flexsn.scan @lif ins(%y : tensor<?x?x?xf32>)
      outs(%e : tensor<?x?x?xf32>) states(%ev : tensor<?x?xf32>)
  return %s, %v : tensor<?x?x?xf32>, tensor<?x?xf32>
}

// -----

// A chain (a cast to f32, then a per-neuron bias, as linalg.map and
// linalg.generic); the bias and a scalar gain become params (through the
// maps their ranks imply: not printed). The scan's
// own second input (a mask) stays where it was, before the fused input.
// CHECK-LABEL: func.func @chain
// CHECK-SAME:    (%[[X:[^:]+]]: tensor<?x?xbf16>, %[[B:[^:]+]]: tensor<?xf32>, %[[G:[^:]+]]: f32, %[[M:[^:]+]]: tensor<?x?xf32>
// CHECK-NOT:     linalg
// CHECK:         flexsn.scan ins(%[[M]], %[[X]] : tensor<?x?xf32>, tensor<?x?xbf16>) params(%[[B]], %[[G]] : tensor<?xf32>, f32)
// CHECK-SAME:      outs(%{{.*}} : tensor<?x?xf32>) {
// CHECK-NEXT:    ^bb0(%[[MI:[^:]*]]: f32, %[[XI:[^:]*]]: f32, %[[BI:[^:]*]]: f32, %[[GI:[^:]*]]: f32):
// CHECK-NEXT:      %[[P:.*]] = arith.addf %[[XI]], %[[BI]] : f32
// CHECK-NEXT:      %[[Q:.*]] = arith.mulf %[[P]], %[[GI]] : f32
// CHECK-NEXT:      %[[O:.*]] = arith.mulf %[[Q]], %[[MI]] : f32
// CHECK-NEXT:      flexsn.yield %[[O]] : f32
func.func @chain(%x: tensor<?x?xbf16>, %b: tensor<?xf32>, %g: f32,
                 %mask: tensor<?x?xf32>, %e: tensor<?x?xf32>)
    -> tensor<?x?xf32> {
  %xf = linalg.map { arith.extf } ins(%x : tensor<?x?xbf16>)
      outs(%e : tensor<?x?xf32>)
  %y = linalg.generic {indexing_maps = [affine_map<(t, n) -> (t, n)>,
                                        affine_map<(t, n) -> (n)>,
                                        affine_map<(t, n) -> ()>,
                                        affine_map<(t, n) -> (t, n)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%xf, %b, %g : tensor<?x?xf32>, tensor<?xf32>, f32)
      outs(%e : tensor<?x?xf32>) {
  ^bb0(%xi: f32, %bi: f32, %gi: f32, %out: f32):
    %p = arith.addf %xi, %bi : f32
    %q = arith.mulf %p, %gi : f32
    linalg.yield %q : f32
  } -> tensor<?x?xf32>
  %o = flexsn.scan ins(%y, %mask : tensor<?x?xf32>, tensor<?x?xf32>)
      outs(%e : tensor<?x?xf32>) {
  ^bb0(%yi: f32, %mi: f32):
    %r = arith.mulf %yi, %mi : f32
    flexsn.yield %r : f32
  }
  return %o : tensor<?x?xf32>
}

// -----

// A producer of a broadcast input: the per-channel weight of a scan with a
// per-channel reduction is computed by a 1-D op over [C]; its operand is
// read per channel too, as a param. The payload's constant from above stays usable (the
// rewrite driver keeps constants at the function's entry).
// CHECK-DAG:   #[[$CHAN:.+]] = affine_map<(d0, d1, d2) -> (d1)>
// CHECK-LABEL: func.func @per_channel_weight
// CHECK-SAME:    (%[[X:[^:]+]]: tensor<?x?x?xf32>, %[[LOGW:[^:]+]]: tensor<?xf32>
// CHECK:         %[[HALF:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT:    flexsn.scan ins(%[[X]] : tensor<?x?x?xf32>) params(%[[LOGW]] : tensor<?xf32>)
// CHECK-SAME:      indexing_maps = [#{{.*}}, #[[$CHAN]], #{{.*}}, #[[$CHAN]]] {
// CHECK-NEXT:    ^bb0(%[[XI:.*]]: f32, %[[LI:.*]]: f32):
// CHECK-NEXT:      %[[E:.*]] = math.exp %[[LI]] : f32
// CHECK-NEXT:      %[[W:.*]] = arith.mulf %[[E]], %[[HALF]] : f32
// CHECK-NEXT:      %[[P:.*]] = arith.mulf %[[XI]], %[[W]] : f32
func.func @per_channel_weight(%x: tensor<?x?x?xf32>, %logw: tensor<?xf32>,
                              %ew: tensor<?xf32>, %e: tensor<?x?x?xf32>)
    -> (tensor<?x?x?xf32>, tensor<?xf32>) {
  %half = arith.constant 0.5 : f32
  %w = linalg.generic {indexing_maps = [affine_map<(c) -> (c)>,
                                        affine_map<(c) -> (c)>],
                       iterator_types = ["parallel"]}
      ins(%logw : tensor<?xf32>) outs(%ew : tensor<?xf32>) {
  ^bb0(%l: f32, %out: f32):
    %ex = math.exp %l : f32
    %r = arith.mulf %ex, %half : f32
    linalg.yield %r : f32
  } -> tensor<?xf32>
  %y, %per_channel = flexsn.scan ins(%x, %w : tensor<?x?x?xf32>, tensor<?xf32>)
      outs(%e : tensor<?x?x?xf32>) reductions(%ew : tensor<?xf32>)
      indexing_maps = [affine_map<(t, c, n) -> (t, c, n)>,
                       affine_map<(t, c, n) -> (c)>,
                       affine_map<(t, c, n) -> (t, c, n)>,
                       affine_map<(t, c, n) -> (c)>] {
  ^bb0(%xi: f32, %wi: f32):
    %p = arith.mulf %xi, %wi : f32
    flexsn.yield %p, %p : f32, f32
  }
  return %y, %per_channel : tensor<?x?x?xf32>, tensor<?xf32>
}

// -----

// Refusals. Each scan keeps its producer; with `remarks`, each says why.

flexsn.neuron @id inputs(%x: f32) outputs(y) {
  flexsn.yield %x : f32
}

#id = affine_map<(t, n) -> (t, n)>
#par = ["parallel", "parallel"]

// CHECK-LABEL: func.func @other_use
// CHECK:         linalg.generic
// CHECK:         flexsn.scan @id
func.func @other_use(%x: tensor<?x?xf32>, %e: tensor<?x?xf32>)
    -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = #par}
      ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%xi: f32, %out: f32):
    %r = arith.addf %xi, %xi : f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  // expected-remark@+1 {{not fused: its producer 'linalg.generic' has other uses of its result: it would run twice}}
  %s = flexsn.scan @id ins(%y : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>)
  return %s, %y : tensor<?x?xf32>, tensor<?x?xf32>
}

// A transpose: the scan would read x along (n, t).
func.func @transpose(%x: tensor<?x?xf32>, %e: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (j, i)>, #id],
                       iterator_types = #par}
      ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%xi: f32, %out: f32):
    linalg.yield %xi : f32
  } -> tensor<?x?xf32>
  // expected-remark@+1 {{not fused: its producer 'linalg.generic' operand #0 would be read through (d0, d1) -> (d1, d0): a scan operand keeps domain dimensions once each, in order}}
  %s = flexsn.scan @id ins(%y : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>)
  return %s : tensor<?x?xf32>
}

// A reduction over a third dimension.
func.func @reduction(%x: tensor<?x?x?xf32>, %e: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %y = linalg.generic {indexing_maps = [affine_map<(t, n, k) -> (t, n, k)>,
                                        affine_map<(t, n, k) -> (t, n)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<?x?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%xi: f32, %acc: f32):
    %r = arith.addf %xi, %acc : f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  // expected-remark@+1 {{not fused: its producer 'linalg.generic' has reduction loops: only elementwise ops fuse}}
  %s = flexsn.scan @id ins(%y : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>)
  return %s : tensor<?x?xf32>
}

// Loop indices.
func.func @index(%e: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %y = linalg.generic {indexing_maps = [#id], iterator_types = #par}
      outs(%e : tensor<?x?xf32>) {
  ^bb0(%out: f32):
    %t = linalg.index 0 : index
    %ti = arith.index_cast %t : index to i32
    %tf = arith.sitofp %ti : i32 to f32
    linalg.yield %tf : f32
  } -> tensor<?x?xf32>
  // expected-remark@+1 {{not fused: its producer 'linalg.generic' reads its loop indices (linalg.index)}}
  %s = flexsn.scan @id ins(%y : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>)
  return %s : tensor<?x?xf32>
}

// A rounding to f16 cannot move into an f32 body.
func.func @round_to_f16(%x: tensor<?x?xf32>, %e: tensor<?x?xf16>,
                        %o: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %y = linalg.map { arith.truncf } ins(%x : tensor<?x?xf32>)
      outs(%e : tensor<?x?xf16>)
  // expected-remark@+1 {{not fused: its producer 'linalg.map' yields f16: its rounding cannot move into a scan body, which computes in f32}}
  %s = flexsn.scan @id ins(%y : tensor<?x?xf16>) outs(%o : tensor<?x?xf32>)
  return %s : tensor<?x?xf32>
}

// A byte mask: scan inputs hold floats.
func.func @byte_mask(%x: tensor<?x?xf32>, %m: tensor<?x?xi8>,
                     %e: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = #par}
      ins(%x, %m : tensor<?x?xf32>, tensor<?x?xi8>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%xi: f32, %mi: i8, %out: f32):
    %mf = arith.uitofp %mi : i8 to f32
    %r = arith.mulf %xi, %mf : f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  // expected-remark@+1 {{not fused: its producer 'linalg.generic' operand #1 holds i8: scan inputs hold f32, f16 or bf16}}
  %s = flexsn.scan @id ins(%y : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>)
  return %s : tensor<?x?xf32>
}

// A value from outside the payload that is no constant.
func.func @captured(%x: tensor<?x?xf32>, %k: f32, %e: tensor<?x?xf32>)
    -> tensor<?x?xf32> {
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = #par}
      ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%xi: f32, %out: f32):
    %r = arith.mulf %xi, %k : f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  // expected-remark@+1 {{not fused: its producer 'linalg.generic' uses a value defined outside it that is not a constant}}
  %s = flexsn.scan @id ins(%y : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>)
  return %s : tensor<?x?xf32>
}

// An optional input reads as zeros when absent: its producer stays.
func.func @optional(%x: tensor<?x?xf32>, %g: tensor<?x?xf32>,
                    %e: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = #par}
      ins(%g : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%gi: f32, %out: f32):
    %r = arith.addf %gi, %gi : f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  // expected-remark@+1 {{not fused: input #1 is optional (it reads as zeros when absent)}}
  %s = flexsn.scan ins(%x, %y : tensor<?x?xf32>, tensor<?x?xf32>)
      outs(%e : tensor<?x?xf32>) {
  ^bb0(%xi: f32, %yi: f32):
    %r = arith.addf %xi, %yi : f32
    flexsn.yield %r : f32
  } attributes {optional_inputs = array<i64: 1>}
  return %s : tensor<?x?xf32>
}
