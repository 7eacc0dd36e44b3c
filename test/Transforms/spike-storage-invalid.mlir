// RUN: flexsn-opt %s --split-input-file '--flexsn-generate-kernels=spike-storage=u8' -verify-diagnostics
// RUN: not flexsn-opt %s '--flexsn-generate-kernels=spike-storage=dense,bits' 2>&1 \
// RUN: | FileCheck %s --check-prefix=BITS
// RUN: not flexsn-opt %s '--flexsn-generate-kernels=spike-storage=u4' 2>&1 \
// RUN: | FileCheck %s --check-prefix=UNKNOWN
// RUN: not flexsn-opt %s '--flexsn-generate-kernels=spike-storage=u8,u8' 2>&1 \
// RUN: | FileCheck %s --check-prefix=TWICE

// UNKNOWN: for the --spike-storage option: 'u4' is not one of dense, u8 or bits
// BITS: spike-storage=bits: neuron @scaled has no spike output
// TWICE: flexsn-generate-kernels: 'spike-storage' lists a value twice

// A neuron whose outputs are not spikes has no byte- or bit-spike kernel:
// an output computed from a spike (here 2 * s) may be anything.
// expected-error @+1 {{spike-storage=u8: neuron @scaled has no spike output (an output that is a flexsn.spike result) to store compactly}}
flexsn.neuron @scaled inputs(%x: f32) states(%v: f32) outputs(y) {
  %s = flexsn.spike %x surrogate(#flexsn.atan) : f32
  %y = arith.addf %s, %s : f32
  flexsn.yield %y, %v : f32, f32
}
