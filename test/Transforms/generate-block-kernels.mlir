// RUN: flexsn-opt %s --split-input-file --flexsn-generate-block-kernels=variants=inference \
// RUN:   -verify-diagnostics | FileCheck %s

// A function marked `flexsn.block` whose only work is one scan (what the
// flexsn-fuse-* passes leave of a spiking block) becomes an inference
// kernel, which replaces it: a buffer per tensor the scan reads or writes,
// in a neuron kernel's order (inputs, initial states, outputs, states,
// param buffers), named by `flexsn.name` (or argN / resultN), then its
// scalar params.

// Batch-norm apply, LIF and a residual add over [T, B, C, S]: scale and
// shift are per-channel param buffers, the state a final state, which
// starts from an initial-state buffer the kernel adds (v_init: absent
// reads as zeros, as the block's zeros); the constants hoisted into the
// block come along into the kernel.
// CHECK-NOT:   func.func @bn_lif(
// CHECK-LABEL: func.func @bn_lif_inference_f32
// CHECK-SAME:    (%[[X:[^:]*]]: memref<?x?x?x?xf32>, %[[V0:[^:]*]]: memref<?x?x?xf32>, %[[Y:[^:]*]]: memref<?x?x?x?xf32>, %[[V:[^:]*]]: memref<?x?x?xf32>, %[[A:[^:]*]]: memref<?xf32>, %[[B:[^:]*]]: memref<?xf32>)
// CHECK-SAME:    flexsn.kernel = #flexsn.kernel<"bn_lif", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>, <"v_init", initial_state, f32, per_neuron, state_init 0>, <"y", output_sequence, f32, sequence, output 0>, <"v", final_state, f32, per_neuron, state_final 0>, <"scale", per_channel_param, f32, per_channel, param "scale" per_channel>, <"shift", per_channel_param, f32, per_channel, param "shift" per_channel>]>
// CHECK:         %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK:         flexsn.scan ins(%[[X]] : memref<?x?x?x?xf32>) inits(%[[V0]] : memref<?x?x?xf32>) params(%[[A]], %[[B]] : memref<?xf32>, memref<?xf32>) outs(%[[Y]] : memref<?x?x?x?xf32>) states(%[[V]] : memref<?x?x?xf32>)
// CHECK:           %[[M:.*]] = arith.mulf
// CHECK:           %[[H:.*]] = arith.addf %[[M]]
// CHECK:           flexsn.apply @lif(%[[H]], %{{.*}}, %[[TWO]])
// CHECK:         return
flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(spike)
    params(%tau: f32 = 2.0) {
  %q = arith.divf %x, %tau : f32
  %h = arith.addf %v, %q : f32
  %s = flexsn.spike %h surrogate(#flexsn.atan) : f32
  flexsn.yield %s, %h : f32, f32
}

#seq = affine_map<(t, b, c, s) -> (t, b, c, s)>
#chan = affine_map<(t, b, c, s) -> (c)>
#neuron = affine_map<(t, b, c, s) -> (b, c, s)>
func.func @bn_lif(%x: tensor<?x?x?x?xf32> {flexsn.name = "x"},
                  %scale: tensor<?xf32> {flexsn.name = "scale"},
                  %shift: tensor<?xf32> {flexsn.name = "shift"})
    -> (tensor<?x?x?x?xf32> {flexsn.name = "y"}, tensor<?x?x?xf32> {flexsn.name = "v"})
    attributes {flexsn.block} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %two = arith.constant 2.0 : f32
  %T = tensor.dim %x, %c0 : tensor<?x?x?x?xf32>
  %B = tensor.dim %x, %c1 : tensor<?x?x?x?xf32>
  %C = tensor.dim %x, %c2 : tensor<?x?x?x?xf32>
  %S = tensor.dim %x, %c3 : tensor<?x?x?x?xf32>
  %e = tensor.empty(%T, %B, %C, %S) : tensor<?x?x?x?xf32>
  %ev = tensor.empty(%B, %C, %S) : tensor<?x?x?xf32>
  %y, %v = flexsn.scan ins(%x : tensor<?x?x?x?xf32>)
      params(%scale, %shift : tensor<?xf32>, tensor<?xf32>)
      outs(%e : tensor<?x?x?x?xf32>) states(%ev : tensor<?x?x?xf32>)
      indexing_maps = [#seq, #chan, #chan, #seq, #neuron] {
  ^bb0(%xi: f32, %vi: f32, %a: f32, %b: f32):
    %m = arith.mulf %xi, %a : f32
    %h = arith.addf %m, %b : f32
    %r:2 = flexsn.apply @lif(%h, %vi, %two) : (f32, f32, f32) -> (f32, f32)
    %o = arith.addf %r#0, %xi : f32
    flexsn.yield %o, %r#1 : f32, f32
  }
  return %y, %v : tensor<?x?x?x?xf32>, tensor<?x?x?xf32>
}

// -----

// Over [T, N] in f16, with an initial state, a per-neuron param and scalar
// params (one trainable); unnamed values are argN / resultN, and the
// buffers follow the scan's operands whatever the return order.
// CHECK-LABEL: func.func @gain_inference_f16
// CHECK-SAME:    flexsn.kernel = #flexsn.kernel<"gain", inference, f16, buffers = [<"arg0", input_sequence, f16, sequence, input 0>, <"v0", initial_state, f16, per_neuron, state_init 0>, <"result1", output_sequence, f16, sequence, output 0>, <"result0", state_sequence, f32, sequence, state_seq 0>, <"bias", per_neuron_param, f32, per_neuron, param "bias" per_neuron>], params = [<"k", 0.000000e+00 : f32, trainable>, <"arg4", false, runtime>]>
func.func @gain(%x: tensor<?x?xf16>, %v0: tensor<?xf16> {flexsn.name = "v0"},
                %bias: tensor<?xf32> {flexsn.name = "bias"},
                %k: f32 {flexsn.name = "k", flexsn.trainable}, %flag: i1,
                %e: tensor<?x?xf16>, %es: tensor<?x?xf32>)
    -> (tensor<?x?xf32>, tensor<?x?xf16>) attributes {flexsn.block} {
  %y, %v = flexsn.scan ins(%x : tensor<?x?xf16>) inits(%v0 : tensor<?xf16>)
      params(%bias, %k, %flag : tensor<?xf32>, f32, i1)
      outs(%e : tensor<?x?xf16>) states(%es : tensor<?x?xf32>) {
  ^bb0(%xi: f32, %vi: f32, %bi: f32, %ki: f32, %f: i1):
    %p = arith.mulf %xi, %ki : f32
    %q = arith.addf %p, %bi : f32
    %w = arith.addf %vi, %q : f32
    %r = arith.select %f, %w, %q : f32
    flexsn.yield %r, %w : f32, f32
  }
  return %v, %y : tensor<?x?xf32>, tensor<?x?xf16>
}

// -----

// What a block kernel cannot hold.

#id = affine_map<(t, n) -> (t, n)>
func.func @unfused(%x: tensor<?x?xf32>, %e: tensor<?x?xf32>) -> tensor<?x?xf32>
    attributes {flexsn.block} {
  // expected-error@+1 {{block @unfused: 'linalg.map' runs outside its scan: a block kernel runs its scan only (the flexsn-fuse-* passes move elementwise ops into it; remarks=true says why an op stayed)}}
  %n = linalg.map { arith.negf } ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>)
  %y = flexsn.scan ins(%n : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%xi: f32):
    flexsn.yield %xi : f32
  }
  return %y : tensor<?x?xf32>
}

// -----

// A sum over t kept per neuron (a spike count; its destination a fill the
// kernel never reads) becomes a state kept only at its end: a final-state
// buffer, `count`, starting from `count_init` (absent: zero) and adding the
// step's value. The state a neuron already carries comes first.
// CHECK-LABEL: func.func @count_inference_f32
// CHECK-SAME:    buffers = [<"x", input_sequence, f32, sequence, input 0>, <"v_init", initial_state, f32, per_neuron, state_init 0>, <"count_init", initial_state, f32, per_neuron, state_init 1>, <"y", output_sequence, f32, sequence, output 0>, <"v", final_state, f32, per_neuron, state_final 0>, <"count", final_state, f32, per_neuron, state_final 1>]>
// CHECK:         flexsn.scan
// CHECK-NEXT:    ^bb0(%[[XI:.*]]: f32, %[[VI:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK:           %[[S:.*]] = arith.select
// CHECK:           %[[SUM:.*]] = arith.addf %[[ACC]], %[[S]] : f32
// CHECK-NEXT:      flexsn.yield %{{.*}}, %{{.*}}, %[[SUM]] : f32, f32, f32
func.func @count(%x: tensor<?x?xf32> {flexsn.name = "x"}, %e: tensor<?x?xf32>,
                 %f: tensor<?xf32>)
    -> (tensor<?x?xf32> {flexsn.name = "y"}, tensor<?xf32> {flexsn.name = "v"},
        tensor<?xf32> {flexsn.name = "count"}) attributes {flexsn.block} {
  %zero = arith.constant 0.0 : f32
  %c = linalg.fill ins(%zero : f32) outs(%f : tensor<?xf32>) -> tensor<?xf32>
  %y, %v, %n = flexsn.scan ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>)
      states(%f : tensor<?xf32>) reductions(%c : tensor<?xf32>) {
  ^bb0(%xi: f32, %vi: f32):
    %one = arith.constant 1.0 : f32
    %h = arith.addf %xi, %vi : f32
    %fire = arith.cmpf oge, %h, %one : f32
    %s = arith.select %fire, %one, %zero : f32
    flexsn.yield %s, %h, %s : f32, f32, f32
  }
  return %y, %v, %n : tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>
}

// -----

func.func @total(%x: tensor<?x?xf32>, %e: tensor<?x?xf32>, %c: tensor<f32>)
    -> (tensor<?x?xf32>, tensor<f32>) attributes {flexsn.block} {
  // expected-error@+1 {{block @total: its scan sums over neurons (a total, a per-channel sum), which is no kernel buffer yet}}
  %y, %n = flexsn.scan ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>)
      reductions(%c : tensor<f32>) {
  ^bb0(%xi: f32):
    flexsn.yield %xi, %xi : f32, f32
  }
  return %y, %n : tensor<?x?xf32>, tensor<f32>
}

// -----

func.func @count_from(%x: tensor<?x?xf32>, %v0: tensor<?xf32>,
                      %e: tensor<?x?xf32>, %f: tensor<?xf32>)
    -> (tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>)
    attributes {flexsn.block} {
  // expected-error@+1 {{block @count_from: its scan sums over t and has initial states; a kernel keeps such a sum as a state, which would need one too}}
  %y, %v, %n = flexsn.scan ins(%x : tensor<?x?xf32>) inits(%v0 : tensor<?xf32>)
      outs(%e : tensor<?x?xf32>) states(%f : tensor<?xf32>)
      reductions(%f : tensor<?xf32>) {
  ^bb0(%xi: f32, %vi: f32):
    %h = arith.addf %xi, %vi : f32
    flexsn.yield %h, %h, %xi : f32, f32, f32
  }
  return %y, %v, %n : tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>
}

// -----

func.func @not_returned(%x: tensor<?x?xf32>, %e: tensor<?x?xf32>, %f: tensor<?xf32>)
    -> tensor<?x?xf32> attributes {flexsn.block} {
  // expected-error@+1 {{block @not_returned: does not return scan result #1: a kernel writes all of them}}
  %y, %v = flexsn.scan ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>)
      states(%f : tensor<?xf32>) {
  ^bb0(%xi: f32, %vi: f32):
    %h = arith.addf %xi, %vi : f32
    flexsn.yield %h, %h : f32, f32
  }
  return %y : tensor<?x?xf32>
}

// -----

func.func @rank3(%x: tensor<?x?x?xf32>, %e: tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
    attributes {flexsn.block} {
  // expected-error@+1 {{block @rank3: its scan runs over a domain of rank 3: a kernel runs over [T, N] or [T, B, C, S]}}
  %y = flexsn.scan ins(%x : tensor<?x?x?xf32>) outs(%e : tensor<?x?x?xf32>) {
  ^bb0(%xi: f32):
    flexsn.yield %xi : f32
  }
  return %y : tensor<?x?x?xf32>
}

// -----

func.func @two_scans(%x: tensor<?x?xf32>, %e: tensor<?x?xf32>) -> tensor<?x?xf32>
    attributes {flexsn.block} {
  %y = flexsn.scan ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%xi: f32):
    flexsn.yield %xi : f32
  }
  // expected-error@+1 {{block @two_scans: holds two scans (flexsn-fuse-siblings merges scans that meet only at each (t, n))}}
  %z = flexsn.scan ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%xi: f32):
    flexsn.yield %xi : f32
  }
  return %z : tensor<?x?xf32>
}

// -----

// expected-error@+1 {{'flexsn.name' "2x" is not a C identifier}}
func.func @bad_name(%x: tensor<?x?xf32> {flexsn.name = "2x"}) attributes {flexsn.block} {
  return
}

// -----

// expected-error@+1 {{'flexsn.block' is a unit attribute of a function (a block that kernel generation compiles)}}
func.func @bad_mark() attributes {flexsn.block = 1 : i32} {
  return
}

// -----

// One argument read as two buffers: their names collide.
func.func @twice(%x: tensor<?x?xf32> {flexsn.name = "x"}, %e: tensor<?x?xf32>)
    -> tensor<?x?xf32> attributes {flexsn.block} {
  // expected-error@+1 {{block @twice: its kernel's signature: two buffers are named 'x'}}
  %y = flexsn.scan ins(%x, %x : tensor<?x?xf32>, tensor<?x?xf32>)
      outs(%e : tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.addf %a, %b : f32
    flexsn.yield %r : f32
  }
  return %y : tensor<?x?xf32>
}

// -----

// Param buffers hold f32.
func.func @half_param(%x: tensor<?x?xf16>, %b: tensor<?xf16> {flexsn.name = "b"},
                      %e: tensor<?x?xf16>) -> tensor<?x?xf16>
    attributes {flexsn.block} {
  // expected-error@+1 {{block @half_param: its kernel's buffer: a per_neuron_param buffer ('b') holds f32, not 'f16'}}
  %y = flexsn.scan ins(%x : tensor<?x?xf16>) params(%b : tensor<?xf16>)
      outs(%e : tensor<?x?xf16>) {
  ^bb0(%a: f32, %bi: f32):
    %r = arith.addf %a, %bi : f32
    flexsn.yield %r : f32
  }
  return %y : tensor<?x?xf16>
}
