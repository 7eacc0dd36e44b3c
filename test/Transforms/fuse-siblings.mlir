// RUN: flexsn-opt %s --split-input-file --flexsn-fuse-siblings=remarks=true \
// RUN:   -verify-diagnostics | FileCheck %s

// flexsn-fuse-siblings merges scans over one domain that meet only at each
// (t, n). Merged cases first (no remark), then the refusals, each with the
// remark saying why.

// A neuron feeding a neuron: the first's spikes, read only by the second,
// are no longer an output; both states are kept, the first's first.
// CHECK-LABEL: func.func @two_layers
// CHECK-SAME:    (%[[X:[^:]+]]: tensor<?x?xf32>, %[[E1:[^:]+]]: tensor<?x?xf32>, %[[F1:[^:]+]]: tensor<?xf32>, %[[E2:[^:]+]]: tensor<?x?xf32>, %[[F2:[^:]+]]: tensor<?xf32>)
// CHECK:         %[[R:.*]]:3 = flexsn.scan ins(%[[X]] : tensor<?x?xf32>) outs(%[[E2]] : tensor<?x?xf32>) states(%[[F1]], %[[F2]] : tensor<?xf32>, tensor<?xf32>) {
// CHECK-NEXT:    ^bb0(%[[XI:[^:]*]]: f32, %[[A:[^:]*]]: f32, %[[B:[^:]*]]: f32):
// CHECK-NEXT:      %[[L1:.*]]:2 = flexsn.apply @lif(%[[XI]], %[[A]]) : (f32, f32) -> (f32, f32)
// CHECK-NEXT:      %[[L2:.*]]:2 = flexsn.apply @lif(%[[L1]]#0, %[[B]]) : (f32, f32) -> (f32, f32)
// CHECK-NEXT:      flexsn.yield %[[L2]]#0, %[[L1]]#1, %[[L2]]#1 : f32, f32, f32
// CHECK-NOT:     flexsn.scan
// CHECK:         return %[[R]]#0, %[[R]]#1, %[[R]]#2
flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(spike) {
  %h = arith.addf %v, %x : f32
  %s = flexsn.spike %h surrogate(#flexsn.atan) : f32
  flexsn.yield %s, %h : f32, f32
}

func.func @two_layers(%x: tensor<?x?xf32>, %e1: tensor<?x?xf32>, %f1: tensor<?xf32>,
                      %e2: tensor<?x?xf32>, %f2: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>) {
  %s1, %v1 = flexsn.scan @lif ins(%x : tensor<?x?xf32>) outs(%e1 : tensor<?x?xf32>)
      states(%f1 : tensor<?xf32>)
  %s2, %v2 = flexsn.scan @lif ins(%s1 : tensor<?x?xf32>) outs(%e2 : tensor<?x?xf32>)
      states(%f2 : tensor<?xf32>)
  return %s2, %v1, %v2 : tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>
}

// -----

// Two bodies on one input, with params and a reduction each: x is read once,
// both outputs stay (both are returned), and the groups are the first's,
// then the second's.
// CHECK-LABEL: func.func @shared_input
// CHECK-SAME:    (%[[X:[^:]+]]: tensor<?x?xf32>, %[[Y:[^:]+]]: tensor<?x?xf32>, %[[A:[^:]+]]: f32, %[[B:[^:]+]]: f32,
// CHECK-SAME:     %[[E1:[^:]+]]: tensor<?x?xf32>, %[[E2:[^:]+]]: tensor<?x?xf32>, %[[R1:[^:]+]]: tensor<f32>, %[[R2:[^:]+]]: tensor<f32>)
// CHECK:         %[[R:.*]]:4 = flexsn.scan ins(%[[X]], %[[Y]] : tensor<?x?xf32>, tensor<?x?xf32>) params(%[[A]], %[[B]] : f32, f32)
// CHECK-SAME:      outs(%[[E1]], %[[E2]] : tensor<?x?xf32>, tensor<?x?xf32>) reductions(%[[R1]], %[[R2]] : tensor<f32>, tensor<f32>) {
// CHECK-NEXT:    ^bb0(%[[XI:[^:]*]]: f32, %[[YI:[^:]*]]: f32, %[[AI:[^:]*]]: f32, %[[BI:[^:]*]]: f32):
// CHECK-NEXT:      %[[P:.*]] = arith.mulf %[[XI]], %[[AI]] : f32
// CHECK-NEXT:      %[[Q:.*]] = arith.mulf %[[XI]], %[[YI]] : f32
// CHECK-NEXT:      %[[QB:.*]] = arith.addf %[[Q]], %[[BI]] : f32
// CHECK-NEXT:      flexsn.yield %[[P]], %[[QB]], %[[P]], %[[QB]] : f32, f32, f32, f32
// CHECK:         return %[[R]]#0, %[[R]]#1, %[[R]]#2, %[[R]]#3
func.func @shared_input(%x: tensor<?x?xf32>, %y: tensor<?x?xf32>, %a: f32, %b: f32,
                        %e1: tensor<?x?xf32>, %e2: tensor<?x?xf32>,
                        %r1: tensor<f32>, %r2: tensor<f32>)
    -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<f32>, tensor<f32>) {
  %p, %tp = flexsn.scan ins(%x : tensor<?x?xf32>) params(%a : f32)
      outs(%e1 : tensor<?x?xf32>) reductions(%r1 : tensor<f32>) {
  ^bb0(%xi: f32, %ai: f32):
    %m = arith.mulf %xi, %ai : f32
    flexsn.yield %m, %m : f32, f32
  }
  %q, %tq = flexsn.scan ins(%x, %y : tensor<?x?xf32>, tensor<?x?xf32>) params(%b : f32)
      outs(%e2 : tensor<?x?xf32>) reductions(%r2 : tensor<f32>) {
  ^bb0(%xi: f32, %yi: f32, %bi: f32):
    %m = arith.mulf %xi, %yi : f32
    %s = arith.addf %m, %bi : f32
    flexsn.yield %s, %s : f32, f32
  }
  return %p, %q, %tp, %tq : tensor<?x?xf32>, tensor<?x?xf32>, tensor<f32>, tensor<f32>
}

// -----

// Refusals. Each pair stays apart; with `remarks`, the second says why.

flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(spike) {
  %h = arith.addf %v, %x : f32
  %s = flexsn.spike %h surrogate(#flexsn.atan) : f32
  flexsn.yield %s, %h : f32, f32
}

// A final state is known only after the last step.
// CHECK-LABEL: func.func @final_state
// CHECK-COUNT-2: flexsn.scan @lif
func.func @final_state(%x: tensor<?x?xf32>, %e: tensor<?x?xf32>,
                       %f: tensor<?xf32>, %e2: tensor<?x?xf32>)
    -> tensor<?x?xf32> {
  %s, %v = flexsn.scan @lif ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>)
      states(%f : tensor<?xf32>)
  // expected-remark@+1 {{not fused with the scan it reads: the second scan's operand #1 is a result of the first scan that is no sequence (a final state or a reduction)}}
  %y = flexsn.scan ins(%s, %v : tensor<?x?xf32>, tensor<?xf32>) outs(%e2 : tensor<?x?xf32>)
      indexing_maps = [affine_map<(t, n) -> (t, n)>, affine_map<(t, n) -> (n)>,
                       affine_map<(t, n) -> (t, n)>] {
  ^bb0(%si: f32, %vi: f32):
    %r = arith.mulf %si, %vi : f32
    flexsn.yield %r : f32
  }
  return %y : tensor<?x?xf32>
}

// Forward and reverse time.
func.func @reverse(%x: tensor<?x?xf32>, %e: tensor<?x?xf32>, %f: tensor<?xf32>,
                   %e2: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %s, %v = flexsn.scan @lif ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>)
      states(%f : tensor<?xf32>)
  // expected-remark@+1 {{not fused with the scan it reads: one scan runs forward in time, the other in reverse}}
  %y = flexsn.scan reverse ins(%s : tensor<?x?xf32>) outs(%e2 : tensor<?x?xf32>) {
  ^bb0(%si: f32):
    flexsn.yield %si : f32
  }
  return %y : tensor<?x?xf32>
}

// The first's spikes are used before the second: the merged scan, at the
// second's place, would come too late.
func.func @used_between(%x: tensor<?x?xf32>, %e: tensor<?x?xf32>,
                        %f: tensor<?xf32>, %e2: tensor<?x?xf32>)
    -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %s, %v = flexsn.scan @lif ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>)
      states(%f : tensor<?xf32>)
  %n = linalg.map { arith.negf } ins(%s : tensor<?x?xf32>) outs(%e2 : tensor<?x?xf32>)
  // expected-remark@+1 {{not fused with the scan it reads: a result of the first scan is used before the second}}
  %y = flexsn.scan ins(%s : tensor<?x?xf32>) outs(%e2 : tensor<?x?xf32>) {
  ^bb0(%si: f32):
    flexsn.yield %si : f32
  }
  return %y, %n : tensor<?x?xf32>, tensor<?x?xf32>
}

// Given initial states for one, zeros for the other.
func.func @inits(%x: tensor<?x?xf32>, %v0: tensor<?xf32>, %e: tensor<?x?xf32>,
                 %f: tensor<?xf32>, %e2: tensor<?x?xf32>, %f2: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>) {
  %s, %v = flexsn.scan @lif ins(%x : tensor<?x?xf32>) inits(%v0 : tensor<?xf32>)
      outs(%e : tensor<?x?xf32>) states(%f : tensor<?xf32>)
  // expected-remark@+1 {{not fused with the scan it reads: one scan starts its states from given values, the other from zeros}}
  %s2, %v2 = flexsn.scan @lif ins(%s : tensor<?x?xf32>) outs(%e2 : tensor<?x?xf32>)
      states(%f2 : tensor<?xf32>)
  return %s2, %v, %v2 : tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>
}
