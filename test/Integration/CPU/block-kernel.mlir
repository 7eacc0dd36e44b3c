// End to end on the CPU: a spiking block written on tensors (batch-norm's
// apply step with per-channel scale and shift, a LIF neuron, a residual
// add) is fused into one scan and compiled to an inference kernel; a
// driver appended after kernel generation runs it on [T, B, C, S] buffers,
// and mlir-runner prints the values worked by hand below. The block is
// test/Pipelines/Inputs/bn_lif_block.mlir. (The driver cannot sit beside
// the block: it calls the kernel that generation adds.)
//
// RUN: rm -rf %t && split-file %s %t
// RUN: flexsn-opt %S/../../Pipelines/Inputs/bn_lif_block.mlir \
// RUN:   --flexsn-fuse-producers --flexsn-fuse-consumers \
// RUN:   --flexsn-generate-block-kernels=variants=inference --mlir-print-local-scope \
// RUN:   -o %t/kernel.mlir
// RUN: FileCheck %s --check-prefix=KERNEL --input-file=%t/kernel.mlir
// RUN: %python -c "import sys; k = open(sys.argv[1]).read().strip(); \
// RUN:   assert k.startswith('module {') and k.endswith('}'), 'unexpected module'; \
// RUN:   sys.stdout.write(k[:-1] + open(sys.argv[2]).read() + '}\n')" \
// RUN:   %t/kernel.mlir %t/main.mlir > %t/linked.mlir
// RUN: flexsn-opt %t/linked.mlir --flexsn-lower-to-cpu=generate-kernels=false \
// RUN:   -o %t/lowered.mlir
// RUN: %python -c "import re, sys; \
// RUN:   sys.stdout.write(re.sub(r'^module attributes \{flexsn\.cpu_kernels = .*\} \{$', \
// RUN:                           'module {', open(sys.argv[1]).read(), count=1, flags=re.M))" \
// RUN:   %t/lowered.mlir > %t/plain.mlir
// RUN: mlir-runner %t/plain.mlir -e main -entry-point-result=void -shared-libs=%mlir_runner_libs \
// RUN: | FileCheck %s
//
// KERNEL-NOT:   func.func @bn_lif(
// KERNEL-LABEL: func.func @bn_lif_inference_f32
// KERNEL-SAME:    #flexsn.kernel<"bn_lif", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>, <"v_init", initial_state, f32, per_neuron, state_init 0>, <"y", output_sequence, f32, sequence, output 0>, <"v", final_state, f32, per_neuron, state_final 0>, <"scale", per_channel_param, f32, per_channel, param "scale" per_channel>, <"shift", per_channel_param, f32, per_channel, param "shift" per_channel>]>
//
// LIF: h = v + (y - v)/2, s = H(h - 1), v' = (1 - s)·h, v0 = 0, on the
// normalized input p = x·scale[c] + shift[c]; the block returns s + x.
// T = 2, B = 1, C = 2, S = 2, scale = [2, 0.5], shift = [0.5, 0.25]:
//   x[0] = [[1, 0.5], [2, -1]]       p[0] = [[2.5, 1.5], [1.25, -0.25]]
//   x[1] = [[0.25, 1.5], [0.5, 3]]   p[1] = [[1, 3.5], [0.5, 1.75]]
//   t = 0: h = [[1.25, 0.75], [0.625, -0.125]], s = [[1, 0], [0, 0]]
//   t = 1: h = [[0.5, 2.125], [0.5625, 0.8125]], s = [[0, 1], [0, 0]],
//          v = [[0.5, 0], [0.5625, 0.8125]]
//   y = s + x = [[[2, 0.5], [2, -1]], [[0.25, 2.5], [0.5, 3]]]
// All exact in f32.
// CHECK:       sizes = [2, 1, 2, 2]
// CHECK-NEXT:  {{\[\[\[\[}}2, {{ *}}0.5],
// CHECK-NEXT:  [2, {{ *}}-1]]],
// CHECK:       {{\[\[\[}}0.25, {{ *}}2.5],
// CHECK-NEXT:  [0.5, {{ *}}3]]]]
// CHECK:       sizes = [1, 2, 2]
// CHECK-NEXT:  {{\[\[\[}}0.5, {{ *}}0],
// CHECK-NEXT:  [0.5625, {{ *}}0.8125]]]

//--- main.mlir
memref.global "private" constant @x : memref<2x1x2x2xf32> =
    dense<[[[[1.0, 0.5], [2.0, -1.0]]], [[[0.25, 1.5], [0.5, 3.0]]]]>
memref.global "private" constant @scale : memref<2xf32> = dense<[2.0, 0.5]>
memref.global "private" constant @shift : memref<2xf32> = dense<[0.5, 0.25]>
memref.global "private" constant @v0 : memref<1x2x2xf32> = dense<0.0>

func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}

func.func @main() {
  %x_g = memref.get_global @x : memref<2x1x2x2xf32>
  %a_g = memref.get_global @scale : memref<2xf32>
  %b_g = memref.get_global @shift : memref<2xf32>
  %x = memref.cast %x_g : memref<2x1x2x2xf32> to memref<?x?x?x?xf32>
  %a = memref.cast %a_g : memref<2xf32> to memref<?xf32>
  %b = memref.cast %b_g : memref<2xf32> to memref<?xf32>
  %v0_g = memref.get_global @v0 : memref<1x2x2xf32>
  %v0 = memref.cast %v0_g : memref<1x2x2xf32> to memref<?x?x?xf32>
  %y_s = memref.alloc() : memref<2x1x2x2xf32>
  %v_s = memref.alloc() : memref<1x2x2xf32>
  %y = memref.cast %y_s : memref<2x1x2x2xf32> to memref<?x?x?x?xf32>
  %v = memref.cast %v_s : memref<1x2x2xf32> to memref<?x?x?xf32>
  func.call @bn_lif_inference_f32(%x, %v0, %y, %v, %a, %b)
      : (memref<?x?x?x?xf32>, memref<?x?x?xf32>, memref<?x?x?x?xf32>,
         memref<?x?x?xf32>, memref<?xf32>, memref<?xf32>) -> ()
  %y_p = memref.cast %y_s : memref<2x1x2x2xf32> to memref<*xf32>
  %v_p = memref.cast %v_s : memref<1x2x2xf32> to memref<*xf32>
  func.call @printMemrefF32(%y_p) : (memref<*xf32>) -> ()
  func.call @printMemrefF32(%v_p) : (memref<*xf32>) -> ()
  return
}
