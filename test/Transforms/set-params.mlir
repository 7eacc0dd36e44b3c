// RUN: flexsn-opt %s --flexsn-set-params='neurons=first values=tau=3.5,soft=true,window=-2 kinds=gain=const,tau=trainable' | FileCheck %s
// RUN: flexsn-opt %s --flexsn-set-params='surrogate=#flexsn.piecewise_leaky_relu<w=0.5,c=0.1> neurons=second' | FileCheck %s --check-prefix=SURROGATE
// RUN: flexsn-opt %neurons/lif.mlir --flexsn-set-params='values=tau=4.0,soft_reset=true' --flexsn-generate-kernels='variants=final-state' | FileCheck %s --check-prefix=SPECIALIZED

// New defaults keep a parameter's binding unless `kinds` changes it.
// CHECK-LABEL: flexsn.neuron @first
// CHECK-NEXT:  params(
// CHECK-NEXT:    %tau: f32 = 3.5 trainable,
// CHECK-NEXT:    %gain: f32 = 2.0,
// CHECK-NEXT:    %soft: i1 = true,
// CHECK-NEXT:    %window: i32 = -2 runtime)
flexsn.neuron @first inputs(%x: f32) states(%v: f32) outputs(spike)
    params(%tau: f32 = 2.0, %gain: f32 = 2.0 runtime, %soft: i1 = false,
           %window: i32 = 7 runtime) {
  %h = arith.addf %v, %x : f32
  %s = flexsn.spike %h surrogate(#flexsn.sigmoid<alpha = 4.0>) : f32
  flexsn.yield %s, %h : f32, f32
}

// A surrogate replaces every spike's, in the named neurons only.
// SURROGATE-LABEL: flexsn.neuron @first
// SURROGATE: surrogate(#flexsn.sigmoid)
// SURROGATE-LABEL: flexsn.neuron @second
// SURROGATE: surrogate(#flexsn.piecewise_leaky_relu<w = 0.5, c = 0.1>)
// SURROGATE: surrogate(#flexsn.piecewise_leaky_relu<w = 0.5, c = 0.1>)
flexsn.neuron @second inputs(%x: f32) states(%v: f32) outputs(a, b) {
  %s = flexsn.spike %x surrogate(#flexsn.atan) : f32
  %t = flexsn.spike %v surrogate(#flexsn.erf) : f32
  flexsn.yield %s, %t, %x : f32, f32, f32
}

// The shipped LIF, configured before kernel generation: its kernels see the
// new defaults, which the lowering specializes.
// SPECIALIZED-LABEL: flexsn.neuron @lif
// SPECIALIZED-NEXT:  params(
// SPECIALIZED-NEXT:    %tau: f32 = 4.0,
// SPECIALIZED:         %soft_reset: i1 = true,
// SPECIALIZED:       func.func @lif_final_state_f32
