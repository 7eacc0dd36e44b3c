// RUN: flexsn-opt %s --convert-flexsn-to-scf -split-input-file -verify-diagnostics

// The loop lowering takes the buffer form: tensor scans are bufferized
// first.
func.func @f(%x: tensor<?x?xf32>, %y: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // expected-error@+1 {{convert-flexsn-to-scf lowers the buffer form: bufferize tensor scans first (one-shot-bufferize)}}
  %out = flexsn.scan ins(%x : tensor<?x?xf32>) outs(%y : tensor<?x?xf32>) {
  ^bb0(%a: f32):
    flexsn.yield %a : f32
  }
  return %out : tensor<?x?xf32>
}
