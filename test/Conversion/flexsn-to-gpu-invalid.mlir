// RUN: flexsn-opt %s --split-input-file --convert-flexsn-to-gpu -verify-diagnostics

// A kernel function holds exactly one scan.
flexsn.neuron @n inputs(%x: f32) outputs(y) {
  flexsn.yield %x : f32
}
// expected-error@+1 {{a kernel function must hold exactly one scan}}
func.func @two(%x: memref<?x?xf32>, %y: memref<?x?xf32>) attributes {flexsn.variant = "inference"} {
  flexsn.scan @n ins(%x : memref<?x?xf32>) outs(%y : memref<?x?xf32>)
  flexsn.scan @n ins(%x : memref<?x?xf32>) outs(%y : memref<?x?xf32>)
  return
}

// -----

// GPU kernels store f32, f16 or bf16 (byte spikes are a CPU-path storage).
flexsn.neuron @n inputs(%x: f32) outputs(y) {
  flexsn.yield %x : f32
}
func.func @bytes(%x: memref<?x?xf16>, %y: memref<?x?xi8>) attributes {flexsn.variant = "inference"} {
  // expected-error@+1 {{GPU kernels store f32, f16 or bf16, got 'i8'}}
  flexsn.scan @n ins(%x : memref<?x?xf16>) outs(%y : memref<?x?xi8>)
  return
}
