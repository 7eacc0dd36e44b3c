// End to end on the CPU: autodiff of a forward kernel written by hand, not
// generated from a neuron. The block below (an affine pre-op, a leaky
// soft-reset neuron, a residual readout) is differentiated by flexsn-autodiff,
// then a driver is appended that runs the forward and the backward kernel,
// and mlir-runner prints their results, checked against the values worked
// by hand below. (As in mlir-runner.mlir, the driver cannot sit beside the
// kernel before autodiff: it calls the backward kernel that autodiff adds.)
//
// RUN: rm -rf %t && split-file %s %t
// RUN: flexsn-opt %t/block.mlir --flexsn-autodiff -o %t/trained.mlir
// RUN: %python -c "import sys; k = open(sys.argv[1]).read().strip(); \
// RUN:   assert k.startswith('module {') and k.endswith('}'), 'unexpected module'; \
// RUN:   sys.stdout.write(k[:-1] + open(sys.argv[2]).read() + '}\n')" \
// RUN:   %t/trained.mlir %t/main.mlir > %t/linked.mlir
// RUN: flexsn-opt %t/linked.mlir --flexsn-lower-to-cpu=generate-kernels=false \
// RUN:   -o %t/lowered.mlir
// RUN: %python -c "import re, sys; \
// RUN:   sys.stdout.write(re.sub(r'^module attributes \{flexsn\.cpu_kernels = .*\} \{$', \
// RUN:                           'module {', open(sys.argv[1]).read(), count=1, flags=re.M))" \
// RUN:   %t/lowered.mlir > %t/plain.mlir
// RUN: mlir-runner %t/plain.mlir -e main -entry-point-result=void -shared-libs=%mlir_runner_libs \
// RUN: | FileCheck %s
//
// The step, with a = scale = 2 (trainable) and c = shift = 0.25 (runtime):
//   p = a·x + c,  h = v/2 + p,  s = H(h - 1),  v' = h - s,  y = s + x,
// with the piecewise-quadratic surrogate psi(u) = max(1 - |u|, 0) for
// ds/dh. T = 2, N = 2, x = [[0.5, 0.25], [0.125, -0.5]], v0 = [0.5, 0]:
//   neuron 0: h = 1.5 (spike, v = 0.5, y = 1.5), then h = 0.75 (v = 0.75,
//             y = 0.125);
//   neuron 1: h = 0.75 (v = 0.75, y = 0.25), then h = -0.375 (v = -0.375,
//             y = -0.5).
//
// Backward, from the last step: with g the incoming gradient of v' (the
// state sequence's gradient plus the carry; the carry starts at the final
// state's gradient), G = dL/dh = g·(1 - psi) + gy·psi, then dx = gy + a·G,
// carry = G/2, da += G·x, and dv0 = the last carry.
// gy = [[1, 0.5], [0.5, 1]], gv_seq = [[0.25, 0.25], [0, 0]], gv_final = [1, -1]:
//   neuron 0: t = 1: psi = 0.75, G = 1·0.25 + 0.5·0.75 = 0.625, dx = 1.75,
//               da += 0.078125, carry = 0.3125;
//             t = 0: psi = 0.5, g = 0.5625, G = 0.78125, dx = 2.5625,
//               da += 0.390625, dv0 = 0.390625;
//   neuron 1: t = 1: psi = 0, G = -1, dx = -1, da += 0.5, carry = -0.5;
//             t = 0: psi = 0.75, g = -0.25, G = 0.3125, dx = 1.125,
//               da += 0.078125, dv0 = 0.15625;
//   da = 1.046875.
// All exact in f32.

// CHECK-LABEL: forward
// CHECK:       sizes = [2, 2]
// CHECK-NEXT:  [1.5, {{ *}}0.25]
// CHECK-NEXT:  [0.125, {{ *}}-0.5]
// CHECK:       sizes = [2, 2]
// CHECK-NEXT:  [0.5, {{ *}}0.75]
// CHECK-NEXT:  [0.75, {{ *}}-0.375]
// CHECK-LABEL: backward
// CHECK:       sizes = [2, 2]
// CHECK-NEXT:  [2.5625, {{ *}}1.125]
// CHECK-NEXT:  [1.75, {{ *}}-1]
// CHECK:       sizes = [2]
// CHECK-NEXT:  [0.390625, {{ *}}0.15625]
// CHECK:       sizes = []
// CHECK-NEXT:  [1.04688]

//--- block.mlir
func.func @block_forward_f32(%x: memref<?x?xf32>, %v0: memref<?xf32>,
                             %y: memref<?x?xf32>, %v: memref<?x?xf32>,
                             %scale: f32, %shift: f32)
    attributes {flexsn.kernel = #flexsn.kernel<"block", forward, f32,
      buffers = [<"x", input_sequence, f32, sequence, input 0>,
                 <"v_init", initial_state, f32, per_neuron, state_init 0>,
                 <"y", output_sequence, f32, sequence, output 0>,
                 <"v_seq", state_sequence, f32, sequence, state_seq 0>],
      params = [<"scale", 1.0 : f32, trainable>, <"shift", 0.0 : f32, runtime>]>} {
  flexsn.scan ins(%x : memref<?x?xf32>) inits(%v0 : memref<?xf32>)
      params(%scale, %shift : f32, f32) outs(%y : memref<?x?xf32>)
      states(%v : memref<?x?xf32>) {
  ^bb0(%xi: f32, %vi: f32, %a: f32, %c: f32):
    %half = arith.constant 0.5 : f32
    %one = arith.constant 1.0 : f32
    %ax = arith.mulf %xi, %a : f32
    %p = arith.addf %ax, %c : f32
    %leak = arith.mulf %vi, %half : f32
    %h = arith.addf %leak, %p : f32
    %over = arith.subf %h, %one : f32
    %s = flexsn.spike %over surrogate(#flexsn.piecewise_quadratic) : f32
    %vn = arith.subf %h, %s : f32
    %yi = arith.addf %s, %xi : f32
    flexsn.yield %yi, %vn : f32, f32
  }
  return
}

//--- main.mlir
memref.global "private" constant @x : memref<2x2xf32> =
    dense<[[0.5, 0.25], [0.125, -0.5]]>
memref.global "private" constant @v0 : memref<2xf32> = dense<[0.5, 0.0]>
memref.global "private" constant @gy : memref<2x2xf32> =
    dense<[[1.0, 0.5], [0.5, 1.0]]>
memref.global "private" constant @gv : memref<2x2xf32> =
    dense<[[0.25, 0.25], [0.0, 0.0]]>
memref.global "private" constant @gfinal : memref<2xf32> = dense<[1.0, -1.0]>
memref.global "private" constant @junk : memref<2x2xf32> = dense<-7.0>
memref.global "private" constant @junk0 : memref<f32> = dense<-7.0>

func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}

func.func @main() {
  %scale = arith.constant 2.0 : f32
  %shift = arith.constant 0.25 : f32
  %junk = memref.get_global @junk : memref<2x2xf32>
  %x_g = memref.get_global @x : memref<2x2xf32>
  %v0_g = memref.get_global @v0 : memref<2xf32>
  %gy_g = memref.get_global @gy : memref<2x2xf32>
  %gv_g = memref.get_global @gv : memref<2x2xf32>
  %gf_g = memref.get_global @gfinal : memref<2xf32>
  %x = memref.cast %x_g : memref<2x2xf32> to memref<?x?xf32>
  %v0 = memref.cast %v0_g : memref<2xf32> to memref<?xf32>
  %gy = memref.cast %gy_g : memref<2x2xf32> to memref<?x?xf32>
  %gv = memref.cast %gv_g : memref<2x2xf32> to memref<?x?xf32>
  %gf = memref.cast %gf_g : memref<2xf32> to memref<?xf32>

  // Results start as -7, so that unwritten elements would show; the
  // parameter gradient too, so that it is seen to be overwritten.
  %y_s = memref.alloc() : memref<2x2xf32>
  %v_s = memref.alloc() : memref<2x2xf32>
  %saved_s = memref.alloc() : memref<2x2xf32>
  %gx_s = memref.alloc() : memref<2x2xf32>
  %gv0_s = memref.alloc() : memref<2xf32>
  %ga = memref.alloc() : memref<f32>
  memref.copy %junk, %y_s : memref<2x2xf32> to memref<2x2xf32>
  memref.copy %junk, %v_s : memref<2x2xf32> to memref<2x2xf32>
  memref.copy %junk, %gx_s : memref<2x2xf32> to memref<2x2xf32>
  %junk0 = memref.get_global @junk0 : memref<f32>
  memref.copy %junk0, %ga : memref<f32> to memref<f32>
  %y = memref.cast %y_s : memref<2x2xf32> to memref<?x?xf32>
  %v = memref.cast %v_s : memref<2x2xf32> to memref<?x?xf32>
  %saved = memref.cast %saved_s : memref<2x2xf32> to memref<?x?xf32>
  %gx = memref.cast %gx_s : memref<2x2xf32> to memref<?x?xf32>
  %gv0 = memref.cast %gv0_s : memref<2xf32> to memref<?xf32>

  vector.print str "forward\n"
  func.call @block_forward_f32(%x, %v0, %y, %v, %saved, %scale, %shift)
      : (memref<?x?xf32>, memref<?xf32>, memref<?x?xf32>, memref<?x?xf32>,
         memref<?x?xf32>, f32, f32) -> ()
  %y_p = memref.cast %y_s : memref<2x2xf32> to memref<*xf32>
  %v_p = memref.cast %v_s : memref<2x2xf32> to memref<*xf32>
  func.call @printMemrefF32(%y_p) : (memref<*xf32>) -> ()
  func.call @printMemrefF32(%v_p) : (memref<*xf32>) -> ()

  vector.print str "backward\n"
  func.call @block_backward_f32(%gy, %gv, %saved, %x, %gf, %gx, %gv0, %ga,
                                %scale, %shift)
      : (memref<?x?xf32>, memref<?x?xf32>, memref<?x?xf32>, memref<?x?xf32>,
         memref<?xf32>, memref<?x?xf32>, memref<?xf32>, memref<f32>, f32,
         f32) -> ()
  %gx_p = memref.cast %gx_s : memref<2x2xf32> to memref<*xf32>
  %gv0_p = memref.cast %gv0_s : memref<2xf32> to memref<*xf32>
  %ga_p = memref.cast %ga : memref<f32> to memref<*xf32>
  func.call @printMemrefF32(%gx_p) : (memref<*xf32>) -> ()
  func.call @printMemrefF32(%gv0_p) : (memref<*xf32>) -> ()
  func.call @printMemrefF32(%ga_p) : (memref<*xf32>) -> ()
  return
}
