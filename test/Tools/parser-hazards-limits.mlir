// The parser-hazard check reads a list's integers as upstream's parser does:
// the int64 limits (decimal or hexadecimal) pass it, and the verifier has
// the last word on them.
//
// RUN: flexsn-opt %s -split-input-file -verify-diagnostics

func.func @limits(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{permutation is not valid}}
  %t = linalg.transpose ins(%a : tensor<4x8xf32>) outs(%b : tensor<8x4xf32>) permutation = [-9223372036854775808, 9223372036854775807]
  return %t : tensor<8x4xf32>
}

// -----

func.func @hex_limit(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{dimensions for reduction should be in the range [0, 1]}}
  %r = linalg.reduce {arith.addf} ins(%a : tensor<4x8xf32>) outs(%b : tensor<8xf32>) dimensions = [0x7fffffffffffffff]
  return %r : tensor<8xf32>
}
