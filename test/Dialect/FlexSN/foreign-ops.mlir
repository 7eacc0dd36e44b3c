// RUN: flexsn-opt %s | FileCheck %s
// RUN: flexsn-opt %s --flexsn-lower-to-cpu=variants=inference | FileCheck %s --check-prefix=CPU
// RUN: not flexsn-opt %s --flexsn-autodiff 2>&1 | FileCheck %s --check-prefix=GRAD

// A body may use any dialect's scalar ops that are free of memory effects
// and regions (asked through interfaces, not by dialect name): here LLVM's
// fadd. It lowers like arith's; training needs a derivative rule, which it
// lacks, and autodiff names it.
// CHECK-LABEL: flexsn.neuron @llvm_add
// CHECK:         llvm.fadd
// CPU-LABEL:   llvm.func @llvm_add_inference_f32
// CPU:           llvm.fadd
// GRAD:        error: 'llvm.fadd' op has no derivative rule (DifferentiableOpInterface), and a gradient flows through it
flexsn.neuron @llvm_add inputs(%x: f32) states(%v: f32) outputs(spike) {
  %h = llvm.fadd %v, %x : f32
  %s = flexsn.spike %h surrogate(#flexsn.atan) : f32
  flexsn.yield %s, %h : f32, f32
}
