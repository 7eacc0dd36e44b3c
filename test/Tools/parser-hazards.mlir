// Upstream's custom parsers of linalg.reduce, linalg.broadcast and
// linalg.transpose crash on a malformed `dimensions =` or `permutation =`
// list; the tools report each such list instead (plain `not`: a crash fails
// the test), at the token that breaks it.
//
// RUN: not flexsn-opt %s 2>&1 | FileCheck %s
// RUN: not flexsn-translate --flexsn-to-manifest %s 2>&1 | FileCheck %s
// RUN: not flexsn-run --variant=inference --output-dir=%t %s 2>&1 | FileCheck %s

func.func @unclosed(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  %r = linalg.reduce ins(%a : tensor<4x8xf32>) outs(%b : tensor<8xf32>) dimensions = [0
    (%x: f32, %y: f32) {
      %s = arith.addf %x, %y : f32
      linalg.yield %s : f32
    }
  return %r : tensor<8xf32>
}
// CHECK: parser-hazards.mlir:[[# @LINE - 6]]:5: error: expected a list of 64-bit integers in square brackets after 'dimensions =', as in 'dimensions = [0, 1]'

func.func @unbracketed(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  %r = linalg.reduce {arith.addf} ins(%a : tensor<4x8xf32>) outs(%b : tensor<8xf32>) dimensions = 0
  return %r : tensor<8xf32>
}
// CHECK: parser-hazards.mlir:[[# @LINE - 3]]:99: error: expected a list of 64-bit integers {{.*}} after 'dimensions ='

func.func @trailing_comma(%a: tensor<8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = linalg.broadcast ins(%a : tensor<8xf32>) outs(%b : tensor<4x8xf32>) dimensions = [0,]
  return %r : tensor<4x8xf32>
}
// CHECK: parser-hazards.mlir:[[# @LINE - 3]]:92: error: expected a list of 64-bit integers {{.*}} after 'dimensions ='

func.func @not_integer(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %r = linalg.transpose ins(%a : tensor<4x8xf32>) outs(%b : tensor<8x4xf32>) permutation = [1, 0.5]
  return %r : tensor<8x4xf32>
}
// CHECK: parser-hazards.mlir:[[# @LINE - 3]]:96: error: expected a list of 64-bit integers {{.*}} after 'permutation ='

func.func @too_large(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %r = linalg.transpose ins(%a : tensor<4x8xf32>) outs(%b : tensor<8x4xf32>) permutation = [1, -9223372036854775809]
  return %r : tensor<8x4xf32>
}
// CHECK: parser-hazards.mlir:[[# @LINE - 3]]:97: error: expected a list of 64-bit integers {{.*}} after 'permutation ='

// The input's last token: reported right after it.
// CHECK: parser-hazards.mlir:[[# @LINE + 1]]:83: error: expected a list of 64-bit integers {{.*}} after 'dimensions ='
%r = linalg.reduce ins(%a : tensor<4x8xf32>) outs(%b : tensor<8xf32>) dimensions =
