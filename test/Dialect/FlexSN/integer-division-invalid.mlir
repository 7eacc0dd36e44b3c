// RUN: flexsn-opt %s -split-input-file -verify-diagnostics

// Integer division and remainder in step bodies: the divisor must be a
// constant other than 0 (and, for signed ops, -1). Dividing by 0, or the
// minimum integer by -1, has no defined result: the CPU kernel dies of
// SIGFPE, and LLVM deletes a kernel that divides by a constant 0.

// A divisor known only at run time may be 0 (a runtime parameter here).
flexsn.neuron @runtime_divisor inputs(%x: f32) outputs(s) params(%k: i32 = 2 runtime) {
  %i = arith.fptosi %x : f32 to i32
  // expected-error@+1 {{'arith.divsi' op divides by a value known only at run time: in a neuron body an integer division or remainder needs a constant divisor other than 0 and -1, since dividing by 0 (or the minimum integer by -1) has no defined result}}
  %q = arith.divsi %i, %k : i32
  %f = arith.sitofp %q : i32 to f32
  flexsn.yield %f : f32
}

// -----

// A const parameter is specialized only later: still not a constant here.
flexsn.neuron @const_param_divisor inputs(%x: f32) outputs(s) params(%k: i32 = 2) {
  %i = arith.fptoui %x : f32 to i32
  // expected-error@+1 {{'arith.remui' op divides by a value known only at run time: in a neuron body an integer division or remainder needs a constant divisor other than 0, since dividing by 0 has no defined result}}
  %r = arith.remui %i, %k : i32
  %f = arith.uitofp %r : i32 to f32
  flexsn.yield %f : f32
}

// -----

// A divisor computed from the input.
flexsn.neuron @computed_divisor inputs(%x: f32) outputs(s) {
  %i = arith.fptosi %x : f32 to i32
  // expected-error@+1 {{'arith.floordivsi' op divides by a value known only at run time}}
  %q = arith.floordivsi %i, %i : i32
  %f = arith.sitofp %q : i32 to f32
  flexsn.yield %f : f32
}

// -----

// A constant 0, signed...
flexsn.neuron @zero_signed inputs(%x: f32) outputs(s) {
  %zero = arith.constant 0 : i32
  %i = arith.fptosi %x : f32 to i32
  // expected-error@+1 {{'arith.divsi' op divides by 0, which has no defined result}}
  %q = arith.divsi %i, %zero : i32
  %f = arith.sitofp %q : i32 to f32
  flexsn.yield %f : f32
}

// -----

// ...or unsigned.
flexsn.neuron @zero_unsigned inputs(%x: f32) outputs(s) {
  %zero = arith.constant 0 : i32
  %i = arith.fptoui %x : f32 to i32
  // expected-error@+1 {{'arith.divui' op divides by 0, which has no defined result}}
  %q = arith.divui %i, %zero : i32
  %f = arith.uitofp %q : i32 to f32
  flexsn.yield %f : f32
}

// -----

// Remainders and rounding divisions are divisions too.
flexsn.neuron @zero_ceildiv inputs(%x: f32) outputs(s) {
  %zero = arith.constant 0 : i32
  %i = arith.fptoui %x : f32 to i32
  // expected-error@+1 {{'arith.ceildivui' op divides by 0}}
  %q = arith.ceildivui %i, %zero : i32
  %f = arith.uitofp %q : i32 to f32
  flexsn.yield %f : f32
}

// -----

flexsn.neuron @zero_remsi inputs(%x: f32) outputs(s) {
  %zero = arith.constant 0 : i32
  %i = arith.fptosi %x : f32 to i32
  // expected-error@+1 {{'arith.remsi' op divides by 0}}
  %r = arith.remsi %i, %zero : i32
  %f = arith.sitofp %r : i32 to f32
  flexsn.yield %f : f32
}

// -----

// -1 overflows a signed division of the minimum integer.
flexsn.neuron @minus_one inputs(%x: f32) outputs(s) {
  %m = arith.constant -1 : i32
  %i = arith.fptosi %x : f32 to i32
  // expected-error@+1 {{'arith.ceildivsi' op divides by -1, which has no defined result for the minimum integer: negate with arith.subi instead}}
  %q = arith.ceildivsi %i, %m : i32
  %f = arith.sitofp %q : i32 to f32
  flexsn.yield %f : f32
}

// -----

// A signed remainder by -1 traps on x86 too.
flexsn.neuron @minus_one_rem inputs(%x: f32) outputs(s) {
  %m = arith.constant -1 : i32
  %i = arith.fptosi %x : f32 to i32
  // expected-error@+1 {{'arith.remsi' op divides by -1}}
  %r = arith.remsi %i, %m : i32
  %f = arith.sitofp %r : i32 to f32
  flexsn.yield %f : f32
}

// -----

// Index arithmetic follows the same rule.
flexsn.neuron @index_zero inputs(%x: f32) outputs(s) {
  %zero = arith.constant 0 : index
  %i = arith.fptosi %x : f32 to i32
  %n = arith.index_cast %i : i32 to index
  // expected-error@+1 {{'arith.divui' op divides by 0}}
  %q = arith.divui %n, %zero : index
  %j = arith.index_cast %q : index to i32
  %f = arith.sitofp %j : i32 to f32
  flexsn.yield %f : f32
}

// -----

// Other dialects' integer divisions too: the index dialect's...
flexsn.neuron @index_dialect inputs(%x: f32) outputs(s) {
  %i = arith.fptosi %x : f32 to i32
  %n = arith.index_cast %i : i32 to index
  // expected-error@+1 {{'index.divs' op divides by a value known only at run time}}
  %q = index.divs %n, %n
  %j = arith.index_cast %q : index to i32
  %f = arith.sitofp %j : i32 to f32
  flexsn.yield %f : f32
}

// -----

// ...and the LLVM dialect's.
flexsn.neuron @llvm_dialect inputs(%x: f32) outputs(s) {
  %zero = arith.constant 0 : i32
  %i = arith.fptosi %x : f32 to i32
  // expected-error@+1 {{'llvm.urem' op divides by 0}}
  %r = llvm.urem %i, %zero : i32
  %f = arith.sitofp %r : i32 to f32
  flexsn.yield %f : f32
}

// -----

// A scan's inline body follows the same rule.
func.func @scan_body(%x: memref<?x?xf32>, %s: memref<?x?xf32>) {
  flexsn.scan ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>) {
  ^bb0(%a: f32):
    %zero = arith.constant 0 : i32
    %i = arith.fptosi %a : f32 to i32
    // expected-error@+1 {{'arith.divsi' op divides by 0, which has no defined result}}
    %q = arith.divsi %i, %zero : i32
    %f = arith.sitofp %q : i32 to f32
    flexsn.yield %f : f32
  }
  return
}

// -----

// A scan body's divisor known only at run time: a runtime parameter.
func.func @scan_param(%x: memref<?x?xf32>, %s: memref<?x?xf32>, %k: i32) {
  flexsn.scan ins(%x : memref<?x?xf32>) params(%k : i32) outs(%s : memref<?x?xf32>) {
  ^bb0(%a: f32, %p: i32):
    %i = arith.fptosi %a : f32 to i32
    // expected-error@+1 {{'arith.remsi' op divides by a value known only at run time: in a scan body}}
    %r = arith.remsi %i, %p : i32
    %f = arith.sitofp %r : i32 to f32
    flexsn.yield %f : f32
  }
  return
}
