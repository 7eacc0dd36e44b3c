// RUN: flexsn-opt %s --split-input-file --flexsn-expand-blocks | FileCheck %s

// Each block shape expands to a function on tensors marked flexsn.block:
// the pre-op, a scan whose inline body applies the neuron, the connection,
// the readout. The declaration itself is gone.

flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(spike)
    params(%v_threshold: f32 = 1.0 runtime) {
  %h = arith.addf %v, %x : f32
  %d = arith.subf %h, %v_threshold : f32
  %s = flexsn.spike %d surrogate(#flexsn.sigmoid<alpha = 4.0>) : f32
  %one = arith.constant 1.0 : f32
  %keep = arith.subf %one, %s : f32
  %v1 = arith.mulf %keep, %h : f32
  flexsn.yield %s, %v1 : f32, f32
}
flexsn.block @bn_lif_f16 neuron(@lif) pre(channel_affine) connection(add) readout(none) storage(f16)

// A per-channel affine LIF block with SEW's ADD, stored in f16: [T, B, C, S]
// sequences, the affine's [C] parameters indexed by the channel, the states
// and the output stored in f16, the step in f32.
// CHECK-DAG: #[[$ID4:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[$CHANNEL:.+]] = affine_map<(d0, d1, d2, d3) -> (d2)>
// CHECK-NOT: flexsn.block @
// CHECK-LABEL: func.func @bn_lif_f16(
// CHECK-SAME: %[[X:.+]]: tensor<?x?x?x?xf16> {flexsn.name = "x"},
// CHECK-SAME: %[[SCALE:.+]]: tensor<?xf32> {flexsn.name = "scale", flexsn.trainable},
// CHECK-SAME: %[[SHIFT:.+]]: tensor<?xf32> {flexsn.name = "shift", flexsn.trainable},
// CHECK-SAME: %[[VTH:.+]]: f32 {flexsn.name = "v_threshold"})
// CHECK-SAME: -> (tensor<?x?x?x?xf16> {flexsn.name = "y"}, tensor<?x?x?xf16> {flexsn.name = "v"})
// CHECK-SAME: attributes {flexsn.block}
// CHECK:      %[[PRE:.+]] = linalg.generic {indexing_maps = [#[[$ID4]], #[[$CHANNEL]], #[[$CHANNEL]], #[[$ID4]]]
// CHECK-SAME:   ins(%[[X]], %[[SCALE]], %[[SHIFT]] :
// CHECK-NEXT: ^bb0(%[[XI:.+]]: f16, %[[A:.+]]: f32, %[[B:.+]]: f32, %{{.+}}: f32):
// CHECK-NEXT:   %[[XF:.+]] = arith.extf %[[XI]] : f16 to f32
// CHECK-NEXT:   %[[M:.+]] = arith.mulf %[[XF]], %[[A]] : f32
// CHECK-NEXT:   %[[R:.+]] = arith.addf %[[M]], %[[B]] : f32
// CHECK-NEXT:   linalg.yield %[[R]] : f32
// CHECK:      %[[OUT:.+]] = tensor.empty({{.*}}) : tensor<?x?x?x?xf32>
// CHECK:      %[[ST:.+]] = tensor.empty({{.*}}) : tensor<?x?x?xf16>
// CHECK:      %[[SCAN:.+]]:2 = flexsn.scan ins(%[[PRE]] : tensor<?x?x?x?xf32>) params(%[[VTH]] : f32) outs(%[[OUT]] : tensor<?x?x?x?xf32>) states(%[[ST]] : tensor<?x?x?xf16>) {
// CHECK:        flexsn.apply @lif
// CHECK:      %[[Y:.+]] = linalg.generic {indexing_maps = [#[[$ID4]], #[[$ID4]], #[[$ID4]]]
// CHECK-SAME:   ins(%[[SCAN]]#0, %[[X]] : tensor<?x?x?x?xf32>, tensor<?x?x?x?xf16>)
// CHECK-NEXT: ^bb0(%[[S:.+]]: f32, %[[XI2:.+]]: f16, %{{.+}}: f16):
// CHECK-NEXT:   %[[XF2:.+]] = arith.extf %[[XI2]] : f16 to f32
// CHECK-NEXT:   %[[SUM:.+]] = arith.addf %[[S]], %[[XF2]] : f32
// CHECK-NEXT:   %[[T:.+]] = arith.truncf %[[SUM]] : f32 to f16
// CHECK-NEXT:   linalg.yield %[[T]] : f16
// CHECK:      return %[[Y]], %[[SCAN]]#1 : tensor<?x?x?x?xf16>, tensor<?x?x?xf16>

// -----

// The neuron alone: no linalg op, the neuron's output name, an inline body
// (autodiff differentiates inline bodies; nothing here fuses).
flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(spike)
    params(%v_threshold: f32 = 1.0 runtime) {
  %h = arith.addf %v, %x : f32
  %d = arith.subf %h, %v_threshold : f32
  %s = flexsn.spike %d surrogate(#flexsn.sigmoid<alpha = 4.0>) : f32
  %one = arith.constant 1.0 : f32
  %keep = arith.subf %one, %s : f32
  %v1 = arith.mulf %keep, %h : f32
  flexsn.yield %s, %v1 : f32, f32
}
flexsn.block @bare neuron(@lif) pre(none) connection(none) readout(none) storage(f32)

// CHECK-LABEL: func.func @bare(
// CHECK-SAME: %[[X:.+]]: tensor<?x?xf32> {flexsn.name = "x"}, %[[VTH:.+]]: f32 {flexsn.name = "v_threshold"})
// CHECK-SAME: -> (tensor<?x?xf32> {flexsn.name = "spike"}, tensor<?xf32> {flexsn.name = "v"})
// CHECK-NOT:  linalg
// CHECK:      %[[SCAN:.+]]:2 = flexsn.scan ins(%[[X]] : tensor<?x?xf32>) params(%[[VTH]] : f32)
// CHECK-NEXT: ^bb0(%[[XI:.+]]: f32, %[[V:.+]]: f32, %[[P:.+]]: f32):
// CHECK-NEXT:   %[[STEP:.+]]:2 = flexsn.apply @lif(%[[XI]], %[[V]], %[[P]])
// CHECK-NEXT:   flexsn.yield %[[STEP]]#0, %[[STEP]]#1
// CHECK-NOT:  linalg
// CHECK:      return %[[SCAN]]#0, %[[SCAN]]#1 : tensor<?x?xf32>, tensor<?xf32>

// -----

// A scalar affine, IAND and a sum over time: the sum starts at zero and
// is the only sequence result; a const parameter is not an argument (the
// inline body makes it a constant) and a trainable one is marked.
flexsn.neuron @plif inputs(%x: f32) states(%v: f32) outputs(spike)
    params(%w: f32 = 0.0 trainable, %v_threshold: f32 = 1.0) {
  %k = arith.addf %v, %x : f32
  %h = arith.mulf %k, %w : f32
  %d = arith.subf %h, %v_threshold : f32
  %s = flexsn.spike %d surrogate(#flexsn.atan) : f32
  flexsn.yield %s, %h : f32, f32
}
flexsn.block @count neuron(@plif) pre(affine) connection(iand) readout(sum) storage(f32)

// CHECK-DAG: #[[$ID2:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$SCALAR:.+]] = affine_map<(d0, d1) -> ()>
// CHECK-LABEL: func.func @count(
// CHECK-SAME: %[[X:.+]]: tensor<?x?xf32> {flexsn.name = "x"},
// CHECK-SAME: %[[SCALE:.+]]: f32 {flexsn.name = "scale", flexsn.trainable},
// CHECK-SAME: %[[SHIFT:.+]]: f32 {flexsn.name = "shift", flexsn.trainable},
// CHECK-SAME: %[[W:.+]]: f32 {flexsn.name = "w", flexsn.trainable})
// CHECK-SAME: -> (tensor<?xf32> {flexsn.name = "readout"}, tensor<?xf32> {flexsn.name = "v"})
// CHECK:      %[[PRE:.+]] = linalg.generic {indexing_maps = [#[[$ID2]], #[[$SCALAR]], #[[$SCALAR]], #[[$ID2]]]
// CHECK-SAME:   ins(%[[X]], %[[SCALE]], %[[SHIFT]] : tensor<?x?xf32>, f32, f32)
// CHECK-NOT:    arith.extf
// CHECK:      %[[SCAN:.+]]:2 = flexsn.scan ins(%[[PRE]] : tensor<?x?xf32>) params(%[[W]] : f32)
// CHECK-NEXT: ^bb0(%[[XI:.+]]: f32, %[[V:.+]]: f32, %[[P:.+]]: f32):
// CHECK-NEXT:   %[[VTH:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:   flexsn.apply @plif(%[[XI]], %[[V]], %[[P]], %[[VTH]])
// CHECK:      %[[Y:.+]] = linalg.generic
// CHECK-SAME:   ins(%[[SCAN]]#0, %[[X]] : tensor<?x?xf32>, tensor<?x?xf32>)
// CHECK-NEXT: ^bb0(%[[S:.+]]: f32, %[[XI2:.+]]: f32, %{{.+}}: f32):
// CHECK-NEXT:   %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:   %[[NOT:.+]] = arith.subf %[[ONE]], %[[S]] : f32
// CHECK-NEXT:   %[[AND:.+]] = arith.mulf %[[NOT]], %[[XI2]] : f32
// CHECK-NEXT:   linalg.yield %[[AND]] : f32
// CHECK:      %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK:      %[[ZEROS:.+]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.+}} : tensor<?xf32>)
// CHECK:      %[[COUNT:.+]] = linalg.reduce ins(%[[Y]] : tensor<?x?xf32>) outs(%[[ZEROS]] : tensor<?xf32>) dimensions = [0]
// CHECK:        arith.addf
// CHECK:      return %[[COUNT]], %[[SCAN]]#1 : tensor<?xf32>, tensor<?xf32>

// -----

// SEW's AND in bf16, without a pre-op: the connection reads x itself.
flexsn.neuron @if inputs(%x: f32) states(%v: f32) outputs(spike) {
  %h = arith.addf %v, %x : f32
  %one = arith.constant 1.0 : f32
  %d = arith.subf %h, %one : f32
  %s = flexsn.spike %d surrogate(#flexsn.sigmoid) : f32
  flexsn.yield %s, %h : f32, f32
}
flexsn.block @and_bf16 neuron(@if) pre(none) connection(and) readout(none) storage(bf16)

// CHECK-LABEL: func.func @and_bf16(
// CHECK-SAME: %[[X:.+]]: tensor<?x?xbf16> {flexsn.name = "x"})
// CHECK-SAME: -> (tensor<?x?xbf16> {flexsn.name = "y"}, tensor<?xbf16> {flexsn.name = "v"})
// CHECK:      %[[SCAN:.+]]:2 = flexsn.scan ins(%[[X]] : tensor<?x?xbf16>) outs(%{{.+}} : tensor<?x?xf32>) states(%{{.+}} : tensor<?xbf16>)
// CHECK:      %[[Y:.+]] = linalg.generic
// CHECK-SAME:   ins(%[[SCAN]]#0, %[[X]] : tensor<?x?xf32>, tensor<?x?xbf16>) outs(%{{.+}} : tensor<?x?xbf16>)
// CHECK-NEXT: ^bb0(%[[S:.+]]: f32, %[[XI:.+]]: bf16, %{{.+}}: bf16):
// CHECK-NEXT:   %[[XF:.+]] = arith.extf %[[XI]] : bf16 to f32
// CHECK-NEXT:   %[[AND:.+]] = arith.mulf %[[S]], %[[XF]] : f32
// CHECK-NEXT:   %[[T:.+]] = arith.truncf %[[AND]] : f32 to bf16
// CHECK-NEXT:   linalg.yield %[[T]] : bf16
// CHECK:      return %[[Y]], %[[SCAN]]#1

// -----

// SEW-ResNet's IAND with the identity path: a second input `skip` after x,
// which the connection reads instead of x; the pre-op still reads x.
flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(spike) {
  %s = flexsn.spike %v surrogate(#flexsn.sigmoid) : f32
  %h = arith.addf %v, %x : f32
  flexsn.yield %s, %h : f32, f32
}
flexsn.block @sew_iand neuron(@lif) pre(channel_affine) connection(iand, skip) readout(none) storage(f32)

// CHECK-LABEL: func.func @sew_iand(
// CHECK-SAME: %[[X:.+]]: tensor<?x?x?x?xf32> {flexsn.name = "x"},
// CHECK-SAME: %[[SKIP:.+]]: tensor<?x?x?x?xf32> {flexsn.name = "skip"},
// CHECK-SAME: %[[SCALE:.+]]: tensor<?xf32> {flexsn.name = "scale", flexsn.trainable},
// CHECK-SAME: %[[SHIFT:.+]]: tensor<?xf32> {flexsn.name = "shift", flexsn.trainable})
// CHECK-SAME: -> (tensor<?x?x?x?xf32> {flexsn.name = "y"}, tensor<?x?x?xf32> {flexsn.name = "v"})
// CHECK:      %[[PRE:.+]] = linalg.generic
// CHECK-SAME:   ins(%[[X]], %[[SCALE]], %[[SHIFT]] :
// CHECK:      %[[SCAN:.+]]:2 = flexsn.scan ins(%[[PRE]] : tensor<?x?x?x?xf32>)
// CHECK:      %[[Y:.+]] = linalg.generic
// CHECK-SAME:   ins(%[[SCAN]]#0, %[[SKIP]] : tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>)
// CHECK-NEXT: ^bb0(%[[S:.+]]: f32, %[[O:.+]]: f32, %{{.+}}: f32):
// CHECK-NEXT:   %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:   %[[K:.+]] = arith.subf %[[ONE]], %[[S]] : f32
// CHECK-NEXT:   %[[R:.+]] = arith.mulf %[[K]], %[[O]] : f32
// CHECK-NEXT:   linalg.yield %[[R]] : f32
// CHECK:      return %[[Y]], %[[SCAN]]#1

// -----

// Spiking-ResNet's bn(x) + identity before the neuron: the second input
// `skip` is added in the pre-op (in f32, after the affine), the neuron
// reads the sum, and the connection (here none) reads nothing.
flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(spike) {
  %s = flexsn.spike %v surrogate(#flexsn.sigmoid) : f32
  %h = arith.addf %v, %x : f32
  flexsn.yield %s, %h : f32, f32
}
flexsn.block @resnet_add neuron(@lif) pre(channel_affine_add) connection(none) readout(none) storage(f16)

// CHECK-LABEL: func.func @resnet_add(
// CHECK-SAME: %[[X:.+]]: tensor<?x?x?x?xf16> {flexsn.name = "x"},
// CHECK-SAME: %[[SKIP:.+]]: tensor<?x?x?x?xf16> {flexsn.name = "skip"},
// CHECK-SAME: %[[SCALE:.+]]: tensor<?xf32> {flexsn.name = "scale", flexsn.trainable},
// CHECK-SAME: %[[SHIFT:.+]]: tensor<?xf32> {flexsn.name = "shift", flexsn.trainable})
// CHECK-SAME: -> (tensor<?x?x?x?xf16> {flexsn.name = "spike"}, tensor<?x?x?xf16> {flexsn.name = "v"})
// CHECK:      %[[PRE:.+]] = linalg.generic {indexing_maps = [#[[$ID4]], #[[$CHANNEL]], #[[$CHANNEL]], #[[$ID4]], #[[$ID4]]]
// CHECK-SAME:   ins(%[[X]], %[[SCALE]], %[[SHIFT]], %[[SKIP]] :
// CHECK-NEXT: ^bb0(%[[XI:.+]]: f16, %[[A:.+]]: f32, %[[B:.+]]: f32, %[[SI:.+]]: f16, %{{.+}}: f32):
// CHECK-NEXT:   %[[XF:.+]] = arith.extf %[[XI]] : f16 to f32
// CHECK-NEXT:   %[[M:.+]] = arith.mulf %[[XF]], %[[A]] : f32
// CHECK-NEXT:   %[[P:.+]] = arith.addf %[[M]], %[[B]] : f32
// CHECK-NEXT:   %[[SF:.+]] = arith.extf %[[SI]] : f16 to f32
// CHECK-NEXT:   %[[R:.+]] = arith.addf %[[P]], %[[SF]] : f32
// CHECK-NEXT:   linalg.yield %[[R]] : f32
// CHECK:      %[[SCAN:.+]]:2 = flexsn.scan ins(%[[PRE]] : tensor<?x?x?x?xf32>)
// CHECK-NOT:  linalg.generic
// CHECK:      return %[[SCAN]]#0, %[[SCAN]]#1 : tensor<?x?x?x?xf16>, tensor<?x?x?xf16>

// -----

// The addition alone (a batch norm run apart): x + skip in f32, scalar
// shapes [T, N], then SEW's ADD of the spikes and x.
flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(spike) {
  %s = flexsn.spike %v surrogate(#flexsn.sigmoid) : f32
  %h = arith.addf %v, %x : f32
  flexsn.yield %s, %h : f32, f32
}
flexsn.block @added neuron(@lif) pre(add) connection(add) readout(none) storage(f32)

// CHECK-DAG: #[[$ID2:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @added(
// CHECK-SAME: %[[X:.+]]: tensor<?x?xf32> {flexsn.name = "x"},
// CHECK-SAME: %[[SKIP:.+]]: tensor<?x?xf32> {flexsn.name = "skip"})
// CHECK:      %[[PRE:.+]] = linalg.generic {indexing_maps = [#[[$ID2]], #[[$ID2]], #[[$ID2]]]
// CHECK-SAME:   ins(%[[X]], %[[SKIP]] :
// CHECK-NEXT: ^bb0(%[[XI:.+]]: f32, %[[SI:.+]]: f32, %{{.+}}: f32):
// CHECK-NEXT:   %[[R:.+]] = arith.addf %[[XI]], %[[SI]] : f32
// CHECK-NEXT:   linalg.yield %[[R]] : f32
// CHECK:      %[[SCAN:.+]]:2 = flexsn.scan ins(%[[PRE]] : tensor<?x?xf32>)
// CHECK:      %[[Y:.+]] = linalg.generic
// CHECK-SAME:   ins(%[[SCAN]]#0, %[[X]] : tensor<?x?xf32>, tensor<?x?xf32>)
