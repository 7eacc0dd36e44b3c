// What the parser-hazard check lets through: well-formed lists in the custom
// form (empty, spaced, hexadecimal), dictionary keys
// named `dimensions` or `permutation` (the generic form's properties, which
// upstream parses safely even when malformed), comments and strings.
//
// RUN: flexsn-opt %s | flexsn-opt | FileCheck %s
// RUN: flexsn-opt --mlir-print-op-generic %s | flexsn-opt | FileCheck %s

// CHECK-LABEL: func.func @lists
// CHECK: linalg.reduce {{.*}} dimensions = [0]
// CHECK: linalg.reduce {{.*}} dimensions = []
// CHECK: linalg.broadcast {{.*}} dimensions = [0]
// CHECK: linalg.transpose {{.*}} permutation = [1, 0]
func.func @lists(%a: tensor<4x8xf32>, %b: tensor<8xf32>, %c: tensor<8x4xf32>)
    -> (tensor<8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x4xf32>) {
  %r = linalg.reduce {arith.addf} ins(%a : tensor<4x8xf32>) outs(%b : tensor<8xf32>) dimensions = [ 0 ]
  %e = linalg.reduce ins(%a : tensor<4x8xf32>) outs(%a : tensor<4x8xf32>) dimensions = []
    (%x: f32, %y: f32) {
      linalg.yield %x : f32
    }
  %d = linalg.broadcast ins(%b : tensor<8xf32>) outs(%a : tensor<4x8xf32>) dimensions = [0x0]
  %t = linalg.transpose ins(%a : tensor<4x8xf32>) outs(%c : tensor<8x4xf32>) permutation = [1, 0]
  return %r, %e, %d, %t : tensor<8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<8x4xf32>
}

// CHECK-LABEL: func.func @keys
// CHECK-SAME: dimensions = "[0"
// CHECK-SAME: permutation = 5
// CHECK: "dimensions = ["
func.func @keys() -> (tensor<4x8xf32>, tensor<8x4xf32>)
    attributes {dimensions = "[0", permutation = 5} {
  // dimensions = [
  %s = arith.constant {note = "dimensions = ["} dense<0.0> : tensor<4x8xf32>
  %i = tensor.empty() : tensor<8x4xf32>
  %t = "linalg.transpose"(%s, %i) <{permutation = array<i64: 1, 0>}> ({
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  }) : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return %s, %t : tensor<4x8xf32>, tensor<8x4xf32>
}
