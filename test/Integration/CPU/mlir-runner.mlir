// End to end on the CPU: the LIF kernels generated from lif.mlir, lowered to
// LLVM and run by mlir-runner from a driver that prints their results, which
// are checked against the LIF equations worked by hand below.
//
// The driver calls the generated functions, so it cannot sit beside the
// neuron before generation (a declaration of @lif_inference_f32 would collide
// with the kernel): the kernels are generated first, then the driver is
// appended to them inside the same module, and the rest of
// flexsn-lower-to-cpu runs on the whole.
//
// RUN: rm -rf %t && split-file %s %t
// RUN: flexsn-opt %t/lif.mlir --flexsn-generate-kernels=storage-types=f32,f16 \
// RUN:   -o %t/kernels.mlir
// RUN: %python -c "import sys; k = open(sys.argv[1]).read().strip(); \
// RUN:   assert k.startswith('module {') and k.endswith('}'), 'unexpected module'; \
// RUN:   sys.stdout.write(k[:-1] + open(sys.argv[2]).read() + '}\n')" \
// RUN:   %t/kernels.mlir %t/main.mlir > %t/linked.mlir
// RUN: flexsn-opt %t/linked.mlir --flexsn-lower-to-cpu=generate-kernels=false \
// RUN:   -o %t/lowered.mlir
// RUN: %python -c "import re, sys; \
// RUN:   sys.stdout.write(re.sub(r'^module attributes \{flexsn\.cpu_kernels = .*\} \{$', \
// RUN:                           'module {', open(sys.argv[1]).read(), count=1, flags=re.M))" \
// RUN:   %t/lowered.mlir > %t/plain.mlir
// RUN: mlir-runner %t/plain.mlir -e main -entry-point-result=void -shared-libs=%mlir_runner_libs \
// RUN: | FileCheck %s
//
// mlir-runner does not load the flexsn dialect, so the lowered module's list
// of kernel signatures (`flexsn.cpu_kernels`, for the manifest) is dropped
// before it runs.
//
// LIF with its defaults (tau = 2, v_threshold = 1, hard reset to 0, decay
// input): h = v + (x - v)/2, s = H(h - 1), v' = (1 - s)·h. T = 4, N = 3:
//
//   neuron 0: x = 2 always, v0 = 0: h = 1 every step, exactly at threshold,
//             so it spikes every step (H(0) = 1) and resets to 0.
//   neuron 1: x = 1 always, v0 = 0: h = 0.5, 0.75, 0.875, 0.9375, never
//             reaching 1; no spikes.
//   neuron 2: x = 1.5, 1.5, 0, 3, v0 = 0.5: h = 1 (spike, v = 0), 0.75,
//             0.375, 0.375 + (3 - 0.375)/2 = 1.6875 (spike, v = 0).
//
// All these values are exact in f32 and f16, so both storage types print
// the same numbers.

// The inference kernel writes the spikes and the voltage after each step.
// CHECK-LABEL: inference f32
// CHECK:       sizes = [4, 3]
// CHECK-NEXT:  [1, {{ *}}0, {{ *}}1]
// CHECK-NEXT:  [1, {{ *}}0, {{ *}}0]
// CHECK-NEXT:  [1, {{ *}}0, {{ *}}0]
// CHECK-NEXT:  [1, {{ *}}0, {{ *}}1]
// CHECK:       sizes = [4, 3]
// CHECK-NEXT:  [0, {{ *}}0.5, {{ *}}0]
// CHECK-NEXT:  [0, {{ *}}0.75, {{ *}}0.75]
// CHECK-NEXT:  [0, {{ *}}0.875, {{ *}}0.375]
// CHECK-NEXT:  [0, {{ *}}0.9375, {{ *}}0]

// The final-state kernel writes the same spikes and only the last voltage.
// CHECK-LABEL: final-state f32
// CHECK:       sizes = [4, 3]
// CHECK-NEXT:  [1, {{ *}}0, {{ *}}1]
// CHECK-NEXT:  [1, {{ *}}0, {{ *}}0]
// CHECK-NEXT:  [1, {{ *}}0, {{ *}}0]
// CHECK-NEXT:  [1, {{ *}}0, {{ *}}1]
// CHECK:       sizes = [3]
// CHECK-NEXT:  [0, {{ *}}0.9375, {{ *}}0]

// The f16 inference kernel, on the same inputs in f16.
// CHECK-LABEL: inference f16
// CHECK:       sizes = [4, 3]
// CHECK-NEXT:  [1, {{ *}}0, {{ *}}1]
// CHECK-NEXT:  [1, {{ *}}0, {{ *}}0]
// CHECK-NEXT:  [1, {{ *}}0, {{ *}}0]
// CHECK-NEXT:  [1, {{ *}}0, {{ *}}1]
// CHECK:       sizes = [4, 3]
// CHECK-NEXT:  [0, {{ *}}0.5, {{ *}}0]
// CHECK-NEXT:  [0, {{ *}}0.75, {{ *}}0.75]
// CHECK-NEXT:  [0, {{ *}}0.875, {{ *}}0.375]
// CHECK-NEXT:  [0, {{ *}}0.9375, {{ *}}0]

// With no initial states neuron 2 starts at 0: h = 0.75, 1.125 (spike),
// 0, 1.5 (spike); neurons 0 and 1 do not change.
// CHECK-LABEL: absent f32
// CHECK:       sizes = [4, 3]
// CHECK-NEXT:  [1, {{ *}}0, {{ *}}0]
// CHECK-NEXT:  [1, {{ *}}0, {{ *}}1]
// CHECK-NEXT:  [1, {{ *}}0, {{ *}}0]
// CHECK-NEXT:  [1, {{ *}}0, {{ *}}1]

//--- lif.mlir
// A copy of lib/Neurons/lif.mlir (the defaults are what the numbers above use).
flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(spike)
    params(%tau: f32 = 2.0, %v_threshold: f32 = 1.0, %v_reset: f32 = 0.0,
           %soft_reset: i1 = false, %detach_reset: i1 = false,
           %decay_input: i1 = true) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  // Charge.
  %v_rest = arith.select %soft_reset, %zero, %v_reset : f32
  %dv = arith.subf %v, %v_rest : f32
  %in = arith.subf %x, %dv : f32
  %in_tau = arith.divf %in, %tau : f32
  %h_decay_input = arith.addf %v, %in_tau : f32
  %dv_tau = arith.divf %dv, %tau : f32
  %leaked = arith.subf %v, %dv_tau : f32
  %h_plain = arith.addf %leaked, %x : f32
  %h = arith.select %decay_input, %h_decay_input, %h_plain : f32
  // Fire.
  %over = arith.subf %h, %v_threshold : f32
  %s = flexsn.spike %over surrogate(#flexsn.sigmoid<alpha = 4.0>) : f32
  %s_detached = flexsn.detach %s : f32
  %s_reset = arith.select %detach_reset, %s_detached, %s : f32
  // Reset.
  %keep = arith.subf %one, %s_reset : f32
  %h_kept = arith.mulf %keep, %h : f32
  %to_reset = arith.mulf %s_reset, %v_reset : f32
  %v_hard = arith.addf %to_reset, %h_kept : f32
  %drop = arith.mulf %s_reset, %v_threshold : f32
  %v_soft = arith.subf %h, %drop : f32
  %v_next = arith.select %soft_reset, %v_soft, %v_hard : f32
  flexsn.yield %s, %v_next : f32, f32
}

//--- main.mlir
memref.global "private" constant @x : memref<4x3xf32> =
    dense<[[2.0, 1.0, 1.5], [2.0, 1.0, 1.5], [2.0, 1.0, 0.0], [2.0, 1.0, 3.0]]>
memref.global "private" constant @v0 : memref<3xf32> = dense<[0.0, 0.0, 0.5]>
memref.global "private" constant @junk : memref<4x3xf32> = dense<-7.0>
memref.global "private" constant @x16 : memref<4x3xf16> =
    dense<[[2.0, 1.0, 1.5], [2.0, 1.0, 1.5], [2.0, 1.0, 0.0], [2.0, 1.0, 3.0]]>
memref.global "private" constant @v016 : memref<3xf16> = dense<[0.0, 0.0, 0.5]>

func.func private @printMemrefF32(memref<*xf32>) attributes {llvm.emit_c_interface}
func.func private @printMemrefF16(memref<*xf16>) attributes {llvm.emit_c_interface}

func.func @main() {
  %x_static = memref.get_global @x : memref<4x3xf32>
  %v0_static = memref.get_global @v0 : memref<3xf32>
  %x = memref.cast %x_static : memref<4x3xf32> to memref<?x?xf32>
  %v0 = memref.cast %v0_static : memref<3xf32> to memref<?xf32>

  %s_static = memref.alloc() : memref<4x3xf32>
  %v_static = memref.alloc() : memref<4x3xf32>
  %vf_static = memref.alloc() : memref<3xf32>
  %s = memref.cast %s_static : memref<4x3xf32> to memref<?x?xf32>
  %v = memref.cast %v_static : memref<4x3xf32> to memref<?x?xf32>
  %vf = memref.cast %vf_static : memref<3xf32> to memref<?xf32>
  // Outputs start as -7, so that unwritten elements would show.
  %junk = memref.get_global @junk : memref<4x3xf32>
  memref.copy %junk, %s_static : memref<4x3xf32> to memref<4x3xf32>
  memref.copy %junk, %v_static : memref<4x3xf32> to memref<4x3xf32>
  %s_print = memref.cast %s_static : memref<4x3xf32> to memref<*xf32>
  %v_print = memref.cast %v_static : memref<4x3xf32> to memref<*xf32>
  %vf_print = memref.cast %vf_static : memref<3xf32> to memref<*xf32>

  vector.print str "inference f32\n"
  func.call @lif_inference_f32(%x, %v0, %s, %v)
      : (memref<?x?xf32>, memref<?xf32>, memref<?x?xf32>, memref<?x?xf32>) -> ()
  func.call @printMemrefF32(%s_print) : (memref<*xf32>) -> ()
  func.call @printMemrefF32(%v_print) : (memref<*xf32>) -> ()

  // Overwrite the spikes first, so that they are seen to be written again.
  memref.copy %junk, %s_static : memref<4x3xf32> to memref<4x3xf32>
  vector.print str "final-state f32\n"
  func.call @lif_final_state_f32(%x, %v0, %s, %vf)
      : (memref<?x?xf32>, memref<?xf32>, memref<?x?xf32>, memref<?xf32>) -> ()
  func.call @printMemrefF32(%s_print) : (memref<*xf32>) -> ()
  func.call @printMemrefF32(%vf_print) : (memref<*xf32>) -> ()

  %x16_static = memref.get_global @x16 : memref<4x3xf16>
  %v016_static = memref.get_global @v016 : memref<3xf16>
  %x16 = memref.cast %x16_static : memref<4x3xf16> to memref<?x?xf16>
  %v016 = memref.cast %v016_static : memref<3xf16> to memref<?xf16>
  %s16_static = memref.alloc() : memref<4x3xf16>
  %v16_static = memref.alloc() : memref<4x3xf16>
  %s16 = memref.cast %s16_static : memref<4x3xf16> to memref<?x?xf16>
  %v16 = memref.cast %v16_static : memref<4x3xf16> to memref<?x?xf16>
  %s16_print = memref.cast %s16_static : memref<4x3xf16> to memref<*xf16>
  %v16_print = memref.cast %v16_static : memref<4x3xf16> to memref<*xf16>

  vector.print str "inference f16\n"
  func.call @lif_inference_f16(%x16, %v016, %s16, %v16)
      : (memref<?x?xf16>, memref<?xf16>, memref<?x?xf16>, memref<?x?xf16>) -> ()
  func.call @printMemrefF16(%s16_print) : (memref<*xf16>) -> ()
  func.call @printMemrefF16(%v16_print) : (memref<*xf16>) -> ()

  // Absent buffers (null base pointers): no initial states, so they start at
  // zero, and no state sequence, which is not written.
  %no_v0 = func.call @null_1d() : () -> memref<?xf32>
  %no_v = func.call @null_2d() : () -> memref<?x?xf32>
  memref.copy %junk, %s_static : memref<4x3xf32> to memref<4x3xf32>
  vector.print str "absent f32\n"
  func.call @lif_inference_f32(%x, %no_v0, %s, %no_v)
      : (memref<?x?xf32>, memref<?xf32>, memref<?x?xf32>, memref<?x?xf32>) -> ()
  func.call @printMemrefF32(%s_print) : (memref<*xf32>) -> ()

  memref.dealloc %s_static : memref<4x3xf32>
  memref.dealloc %v_static : memref<4x3xf32>
  memref.dealloc %vf_static : memref<3xf32>
  memref.dealloc %s16_static : memref<4x3xf16>
  memref.dealloc %v16_static : memref<4x3xf16>
  return
}

// Memrefs whose pointers are null, as a host passes for an absent buffer.
func.func @null_1d() -> memref<?xf32> {
  %null = llvm.mlir.zero : !llvm.ptr
  %zero = llvm.mlir.constant(0 : i64) : i64
  %one = llvm.mlir.constant(1 : i64) : i64
  %n = llvm.mlir.constant(3 : i64) : i64
  %d0 = llvm.mlir.poison : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %d1 = llvm.insertvalue %null, %d0[0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %d2 = llvm.insertvalue %null, %d1[1] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %d3 = llvm.insertvalue %zero, %d2[2] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %d4 = llvm.insertvalue %n, %d3[3, 0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %d5 = llvm.insertvalue %one, %d4[4, 0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %m = builtin.unrealized_conversion_cast %d5 : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> to memref<?xf32>
  return %m : memref<?xf32>
}

func.func @null_2d() -> memref<?x?xf32> {
  %null = llvm.mlir.zero : !llvm.ptr
  %zero = llvm.mlir.constant(0 : i64) : i64
  %one = llvm.mlir.constant(1 : i64) : i64
  %t = llvm.mlir.constant(4 : i64) : i64
  %n = llvm.mlir.constant(3 : i64) : i64
  %d0 = llvm.mlir.poison : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
  %d1 = llvm.insertvalue %null, %d0[0] : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
  %d2 = llvm.insertvalue %null, %d1[1] : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
  %d3 = llvm.insertvalue %zero, %d2[2] : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
  %d4 = llvm.insertvalue %t, %d3[3, 0] : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
  %d5 = llvm.insertvalue %n, %d4[3, 1] : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
  %d6 = llvm.insertvalue %n, %d5[4, 0] : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
  %d7 = llvm.insertvalue %one, %d6[4, 1] : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
  %m = builtin.unrealized_conversion_cast %d7 : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)> to memref<?x?xf32>
  return %m : memref<?x?xf32>
}
