// RUN: flexsn-opt %s | FileCheck %s
// RUN: flexsn-opt %s --flexsn-lower-to-cpu -o /dev/null

// Integer divisions and remainders by a constant other than 0 (and -1 for
// signed ops) are welcome in step bodies: their result is defined for every
// dividend. (integer-division-invalid.mlir holds the rejected divisors.)

// CHECK-LABEL: flexsn.neuron @counter
// CHECK: arith.divsi
// CHECK: arith.remsi
// CHECK: arith.floordivsi
// CHECK: arith.ceildivsi
// CHECK: arith.divui
// CHECK: arith.remui
// CHECK: arith.ceildivui
flexsn.neuron @counter inputs(%x: f32) states(%n: f32) outputs(phase) {
  %c2 = arith.constant 2 : i32
  %cm3 = arith.constant -3 : i32
  %c4 = arith.constant 4 : i32
  %i = arith.fptosi %n : f32 to i32
  %a = arith.divsi %i, %c2 : i32
  %b = arith.remsi %a, %cm3 : i32
  %c = arith.floordivsi %b, %cm3 : i32
  %d = arith.ceildivsi %c, %c4 : i32
  %e = arith.divui %d, %c4 : i32
  %f = arith.remui %e, %c2 : i32
  %g = arith.ceildivui %f, %c2 : i32
  %phase = arith.sitofp %g : i32 to f32
  %n1 = arith.addf %n, %x : f32
  flexsn.yield %phase, %n1 : f32, f32
}

// An unsigned division by the all-ones constant is a division by the
// largest unsigned integer: defined.
// CHECK-LABEL: flexsn.neuron @unsigned_all_ones
// CHECK: arith.divui
flexsn.neuron @unsigned_all_ones inputs(%x: f32) outputs(s) {
  %m = arith.constant -1 : i32
  %i = arith.fptoui %x : f32 to i32
  %q = arith.divui %i, %m : i32
  %f = arith.uitofp %q : i32 to f32
  flexsn.yield %f : f32
}

// In a scan's inline body too.
// CHECK-LABEL: func.func @scan_body
// CHECK: arith.remsi
func.func @scan_body(%x: memref<?x?xf32>, %s: memref<?x?xf32>) {
  flexsn.scan ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>) {
  ^bb0(%a: f32):
    %c3 = arith.constant 3 : i32
    %i = arith.fptosi %a : f32 to i32
    %r = arith.remsi %i, %c3 : i32
    %f = arith.sitofp %r : i32 to f32
    flexsn.yield %f : f32
  }
  return
}
