// RUN: flexsn-opt %s --split-input-file --flexsn-fuse-consumers=remarks=true \
// RUN:   -verify-diagnostics | FileCheck %s

// flexsn-fuse-consumers moves elementwise linalg consumers of scan sequences
// into the scan. Fused cases first (no remark), then the refusals, each with
// the remark saying why.

// A residual add of the spikes and the block input, stored as f16: the
// scan's spike output is dropped (nothing else reads it), x is read once,
// the truncation becomes the new output's f16 storage, and the destination
// made after the scan is made before it. The state stays.
// CHECK-LABEL: func.func @residual
// CHECK-SAME:    (%[[X:[^:]+]]: tensor<?x?xf32>, %[[E:[^:]+]]: tensor<?x?xf32>, %[[EV:[^:]+]]: tensor<?xf32>)
// CHECK:         %[[T:.*]] = tensor.dim %[[X]], %{{.*}} : tensor<?x?xf32>
// CHECK:         %[[N:.*]] = tensor.dim %[[X]], %{{.*}} : tensor<?x?xf32>
// CHECK:         %[[OUT:.*]] = tensor.empty(%[[T]], %[[N]]) : tensor<?x?xf16>
// CHECK:         %[[R:.*]]:2 = flexsn.scan ins(%[[X]] : tensor<?x?xf32>) outs(%[[OUT]] : tensor<?x?xf16>) states(%[[EV]] : tensor<?xf32>) {
// CHECK-NEXT:    ^bb0(%[[XI:.*]]: f32, %[[V:.*]]: f32):
// CHECK-NEXT:      %[[S:.*]]:2 = flexsn.apply @lif(%[[XI]], %[[V]], %{{.*}}) : (f32, f32, f32) -> (f32, f32)
// CHECK-NEXT:      %[[Y:.*]] = arith.addf %[[S]]#0, %[[XI]] : f32
// CHECK-NEXT:      flexsn.yield %[[Y]], %[[S]]#1 : f32, f32
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[R]]#0, %[[R]]#1
flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(spike)
    params(%tau: f32 = 2.0) {
  %h = arith.divf %x, %tau : f32
  %s = flexsn.spike %h surrogate(#flexsn.sigmoid<alpha = 4.0>) : f32
  flexsn.yield %s, %h : f32, f32
}

#id = affine_map<(t, n) -> (t, n)>
func.func @residual(%x: tensor<?x?xf32>, %e: tensor<?x?xf32>, %ev: tensor<?xf32>)
    -> (tensor<?x?xf16>, tensor<?xf32>) {
  %s, %v = flexsn.scan @lif ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>)
      states(%ev : tensor<?xf32>)
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %T = tensor.dim %x, %c0 : tensor<?x?xf32>
  %N = tensor.dim %x, %c1 : tensor<?x?xf32>
  %out = tensor.empty(%T, %N) : tensor<?x?xf16>
  %y = linalg.generic {indexing_maps = [#id, #id, #id],
                       iterator_types = ["parallel", "parallel"]}
      ins(%s, %x : tensor<?x?xf32>, tensor<?x?xf32>) outs(%out : tensor<?x?xf16>) {
  ^bb0(%si: f32, %xi: f32, %o: f16):
    %r = arith.addf %si, %xi : f32
    %h = arith.truncf %r : f32 to f16
    linalg.yield %h : f16
  } -> tensor<?x?xf16>
  return %y, %v : tensor<?x?xf16>, tensor<?xf32>
}

// -----

// A chain on an inline body: SEW-ResNet's IAND with another sequence,
// (1 - s)·g, then a scaling by a scalar; and a consumer of the state
// sequence scaling it per neuron. The scalar and the per-neuron weight
// become params (their maps, a scalar's and a per-neuron one's, are the
// ones the ranks imply: not printed). The spikes stay an output (returned);
// the chain's intermediate does not.
// CHECK-LABEL: func.func @chain
// CHECK-SAME:    (%[[X:[^:]+]]: tensor<?x?xf32>, %[[G:[^:]+]]: tensor<?x?xf32>, %[[W:[^:]+]]: tensor<?xf32>, %[[K:[^:]+]]: f32,
// CHECK-SAME:     %[[E:[^:]+]]: tensor<?x?xf32>, %[[E2:[^:]+]]: tensor<?x?xf32>, %[[E3:[^:]+]]: tensor<?x?xf32>, %[[E4:[^:]+]]: tensor<?x?xf32>)
// CHECK:         %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:    %[[R:.*]]:4 = flexsn.scan ins(%[[X]], %[[G]] : tensor<?x?xf32>, tensor<?x?xf32>) params(%[[K]], %[[W]] : f32, tensor<?xf32>)
// CHECK-SAME:      outs(%[[E]], %[[E3]], %[[E4]] : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) states(%[[E2]] : tensor<?x?xf32>) {
// CHECK-NEXT:    ^bb0(%[[XI:[^:]*]]: f32, %[[GI:[^:]*]]: f32, %[[V:[^:]*]]: f32, %[[KI:[^:]*]]: f32, %[[WI:[^:]*]]: f32):
// CHECK-NEXT:      %[[H:.*]] = arith.addf %[[V]], %[[XI]] : f32
// CHECK-NEXT:      %[[S:.*]] = flexsn.spike %[[H]]
// CHECK-NEXT:      %[[NS:.*]] = arith.subf %[[ONE]], %[[S]] : f32
// CHECK-NEXT:      %[[I:.*]] = arith.mulf %[[NS]], %[[GI]] : f32
// CHECK-NEXT:      %[[SC:.*]] = arith.mulf %[[I]], %[[KI]] : f32
// CHECK-NEXT:      %[[VW:.*]] = arith.mulf %[[H]], %[[WI]] : f32
// CHECK-NEXT:      flexsn.yield %[[S]], %[[SC]], %[[VW]], %[[H]] : f32, f32, f32, f32
// CHECK:         return %[[R]]#0, %[[R]]#1, %[[R]]#2
#id = affine_map<(t, n) -> (t, n)>
func.func @chain(%x: tensor<?x?xf32>, %g: tensor<?x?xf32>, %w: tensor<?xf32>,
                 %k: f32, %e: tensor<?x?xf32>, %e2: tensor<?x?xf32>,
                 %e3: tensor<?x?xf32>, %e4: tensor<?x?xf32>)
    -> (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) {
  %s, %h = flexsn.scan ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>)
      states(%e2 : tensor<?x?xf32>) {
  ^bb0(%xi: f32, %v: f32):
    %h1 = arith.addf %v, %xi : f32
    %s1 = flexsn.spike %h1 surrogate(#flexsn.atan) : f32
    flexsn.yield %s1, %h1 : f32, f32
  }
  %iand = linalg.generic {indexing_maps = [#id, #id, #id],
                          iterator_types = ["parallel", "parallel"]}
      ins(%s, %g : tensor<?x?xf32>, tensor<?x?xf32>) outs(%e3 : tensor<?x?xf32>) {
  ^bb0(%si: f32, %gi: f32, %o: f32):
    %one = arith.constant 1.0 : f32
    %ns = arith.subf %one, %si : f32
    %r = arith.mulf %ns, %gi : f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  %scaled = linalg.generic {indexing_maps = [#id, affine_map<(t, n) -> ()>, #id],
                            iterator_types = ["parallel", "parallel"]}
      ins(%iand, %k : tensor<?x?xf32>, f32) outs(%e3 : tensor<?x?xf32>) {
  ^bb0(%ii: f32, %ki: f32, %o: f32):
    %r = arith.mulf %ii, %ki : f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  %vw = linalg.generic {indexing_maps = [#id, affine_map<(t, n) -> (n)>, #id],
                        iterator_types = ["parallel", "parallel"]}
      ins(%h, %w : tensor<?x?xf32>, tensor<?xf32>) outs(%e4 : tensor<?x?xf32>) {
  ^bb0(%hi: f32, %wi: f32, %o: f32):
    %r = arith.mulf %hi, %wi : f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  return %s, %scaled, %vw : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>
}

// -----

// A spike count (a sum over t into zeros) and a readout's total over t of
// the spikes scaled per neuron: each becomes a scan reduction, kept per
// neuron (maps implied by the ranks); the spikes are no longer stored, and
// the scan keeps only its input and the two sums.
// CHECK-LABEL: func.func @spike_count
// CHECK-SAME:    (%[[X:[^:]+]]: tensor<?x?xf32>, %[[W:[^:]+]]: tensor<?xf32>, %[[E:[^:]+]]: tensor<?x?xf32>, %[[C:[^:]+]]: tensor<?xf32>, %[[O:[^:]+]]: tensor<?xf32>)
// CHECK:         %[[ZC:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[C]] : tensor<?xf32>)
// CHECK:         %[[ZO:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[O]] : tensor<?xf32>)
// CHECK:         %[[R:.*]]:2 = flexsn.scan ins(%[[X]] : tensor<?x?xf32>) params(%[[W]] : tensor<?xf32>)
// CHECK-SAME:      reductions(%[[ZO]], %[[ZC]] : tensor<?xf32>, tensor<?xf32>) {
// CHECK-NEXT:    ^bb0(%[[XI:[^:]*]]: f32, %[[V:[^:]*]]: f32, %[[WI:[^:]*]]: f32):
// CHECK-NEXT:      %[[S:.*]]:2 = flexsn.apply @lif(%[[XI]], %[[V]]) : (f32, f32) -> (f32, f32)
// CHECK-NEXT:      %[[SW:.*]] = arith.mulf %[[S]]#0, %[[WI]] : f32
// CHECK-NEXT:      flexsn.yield %[[S]]#1, %[[SW]], %[[S]]#0 : f32, f32, f32
// CHECK:         return %[[R]]#1, %[[R]]#0
flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(spike) {
  %h = arith.addf %v, %x : f32
  %s = flexsn.spike %h surrogate(#flexsn.atan) : f32
  flexsn.yield %s, %h : f32, f32
}

func.func @spike_count(%x: tensor<?x?xf32>, %w: tensor<?xf32>,
                       %e: tensor<?x?xf32>, %count: tensor<?xf32>,
                       %out: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>) {
  %zero = arith.constant 0.0 : f32
  %zc = linalg.fill ins(%zero : f32) outs(%count : tensor<?xf32>) -> tensor<?xf32>
  %zo = linalg.fill ins(%zero : f32) outs(%out : tensor<?xf32>) -> tensor<?xf32>
  %s = flexsn.scan @lif ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>)
  %c = linalg.reduce { arith.addf } ins(%s : tensor<?x?xf32>)
      outs(%zc : tensor<?xf32>) dimensions = [0]
  %o = linalg.generic {indexing_maps = [affine_map<(t, n) -> (t, n)>,
                                        affine_map<(t, n) -> (n)>,
                                        affine_map<(t, n) -> (n)>],
                       iterator_types = ["reduction", "parallel"]}
      ins(%s, %w : tensor<?x?xf32>, tensor<?xf32>) outs(%zo : tensor<?xf32>) {
  ^bb0(%si: f32, %wi: f32, %acc: f32):
    %p = arith.mulf %si, %wi : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<?xf32>
  return %c, %o : tensor<?xf32>, tensor<?xf32>
}

// -----

// Refusals. Each consumer stays; with `remarks`, each says why.

flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(spike) {
  %s = flexsn.spike %x surrogate(#flexsn.atan) : f32
  flexsn.yield %s, %x : f32, f32
}

#id = affine_map<(t, n) -> (t, n)>
#par = ["parallel", "parallel"]

// A final state is no per-step value.
// CHECK-LABEL: func.func @final_state
// CHECK:         flexsn.scan @lif
// CHECK:         linalg.map
func.func @final_state(%x: tensor<?x?xf32>, %e: tensor<?x?xf32>,
                       %ev: tensor<?xf32>) -> tensor<?xf32> {
  %s, %v = flexsn.scan @lif ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>)
      states(%ev : tensor<?xf32>)
  // expected-remark@+1 {{not fused into the scan: consumer 'linalg.map' operand #0 is a scan result that is no sequence (a final state or a reduction)}}
  %y = linalg.map { arith.negf } ins(%v : tensor<?xf32>) outs(%ev : tensor<?xf32>)
  return %y : tensor<?xf32>
}

// The consumer would read the body's values before their f16 rounding.
func.func @half_sequence(%x: tensor<?x?xf32>, %e: tensor<?x?xf16>)
    -> tensor<?x?xf16> {
  %s = flexsn.scan @lif ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf16>)
  // expected-remark@+1 {{not fused into the scan: consumer 'linalg.map' operand #0 is the scan's f16 sequence: the body's values are f32 before storage}}
  %y = linalg.map { arith.negf } ins(%s : tensor<?x?xf16>) outs(%e : tensor<?x?xf16>)
  return %y : tensor<?x?xf16>
}

// An operand computed after the scan (from its own result) cannot become a
// scan input.
func.func @operand_after(%x: tensor<?x?xf32>, %e: tensor<?x?xf32>,
                         %count: tensor<?xf32>, %e2: tensor<?x?xf32>)
    -> tensor<?x?xf32> {
  %s = flexsn.scan @lif ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>)
  // expected-remark@+1 {{not fused into the scan: consumer 'linalg.reduce' sums into a destination not known to hold +0.0 (a scan reduction starts from +0.0)}}
  %c = linalg.reduce { arith.addf } ins(%s : tensor<?x?xf32>)
      outs(%count : tensor<?xf32>) dimensions = [0]
  // expected-remark@+1 {{not fused into the scan: consumer 'linalg.generic' operand #1 is computed after the scan}}
  %y = linalg.generic {indexing_maps = [#id, affine_map<(t, n) -> (n)>, #id],
                       iterator_types = #par}
      ins(%s, %c : tensor<?x?xf32>, tensor<?xf32>) outs(%e2 : tensor<?x?xf32>) {
  ^bb0(%si: f32, %ci: f32, %o: f32):
    %r = arith.mulf %si, %ci : f32
    linalg.yield %r : f32
  } -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

// A sum over t fuses only into zeros: a scan reduction starts from +0.0.
func.func @count_into_argument(%x: tensor<?x?xf32>, %e: tensor<?x?xf32>,
                               %count: tensor<?xf32>) -> tensor<?xf32> {
  %s = flexsn.scan @lif ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>)
  // expected-remark@+1 {{not fused into the scan: consumer 'linalg.reduce' sums into a destination not known to hold +0.0 (a scan reduction starts from +0.0)}}
  %c = linalg.reduce { arith.addf } ins(%s : tensor<?x?xf32>)
      outs(%count : tensor<?xf32>) dimensions = [0]
  return %c : tensor<?xf32>
}

// A sum over the neurons of each step is no time reduction.
func.func @per_step_sum(%x: tensor<?x?xf32>, %e: tensor<?x?xf32>,
                        %per_step: tensor<?xf32>) -> tensor<?xf32> {
  %zero = arith.constant 0.0 : f32
  %zeros = linalg.fill ins(%zero : f32) outs(%per_step : tensor<?xf32>) -> tensor<?xf32>
  %s = flexsn.scan @lif ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>)
  // expected-remark@+1 {{not fused into the scan: consumer 'linalg.reduce' reduces other than over t into one value per neuron}}
  %c = linalg.reduce { arith.addf } ins(%s : tensor<?x?xf32>)
      outs(%zeros : tensor<?xf32>) dimensions = [1]
  return %c : tensor<?xf32>
}

// A maximum over t is no sum.
func.func @max_over_time(%x: tensor<?x?xf32>, %e: tensor<?x?xf32>,
                         %m: tensor<?xf32>) -> tensor<?xf32> {
  %zero = arith.constant 0.0 : f32
  %zeros = linalg.fill ins(%zero : f32) outs(%m : tensor<?xf32>) -> tensor<?xf32>
  %s = flexsn.scan @lif ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>)
  // expected-remark@+1 {{not fused into the scan: consumer 'linalg.reduce' reduces other than by adding each step's value to its accumulator}}
  %c = linalg.reduce { arith.maximumf } ins(%s : tensor<?x?xf32>)
      outs(%zeros : tensor<?xf32>) dimensions = [0]
  return %c : tensor<?xf32>
}

// Spikes as bytes are a kernel-generation choice, not an op's.
func.func @to_bytes(%x: tensor<?x?xf32>, %e: tensor<?x?xf32>,
                    %b: tensor<?x?xi8>) -> tensor<?x?xi8> {
  %s = flexsn.scan @lif ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>)
  // expected-remark@+1 {{not fused into the scan: consumer 'linalg.map' yields i8: a scan stores its body's f32 values as f32, f16 or bf16 (and spikes as bytes or bits, which kernel generation chooses)}}
  %y = linalg.map { arith.fptoui } ins(%s : tensor<?x?xf32>) outs(%b : tensor<?x?xi8>)
  return %y : tensor<?x?xi8>
}

// A transpose of the spikes.
func.func @transpose(%x: tensor<?x?xf32>, %e: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %s = flexsn.scan @lif ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>)
  // expected-remark@+1 {{not fused into the scan: consumer 'linalg.generic' writes its result other than along the scan's domain}}
  %y = linalg.generic {indexing_maps = [#id, affine_map<(t, n) -> (n, t)>],
                       iterator_types = #par}
      ins(%s : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%si: f32, %o: f32):
    linalg.yield %si : f32
  } -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}
