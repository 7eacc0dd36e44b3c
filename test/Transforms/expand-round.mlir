// RUN: flexsn-opt %s --flexsn-expand-surrogates | FileCheck %s
// RUN: flexsn-opt %s --flexsn-expand-surrogates --convert-scf-to-cf \
// RUN:   --convert-to-llvm --reconcile-unrealized-casts \
// RUN: | mlir-runner -e main -entry-point-result=void \
// RUN:   -shared-libs=/usr/lib/llvm-22/lib/libmlir_c_runner_utils.so,/usr/lib/llvm-22/lib/libmlir_runner_utils.so \
// RUN: | FileCheck %s --check-prefix=VALUES

// flexsn.round rounds to the narrow type and widens back; `other` steps the
// rounded value's bits toward the input, unless it was exact. The runner
// prints both for inputs on either side of 1.0, of 0, past the largest
// finite value, exact ones and NaN. The expected values are the types'
// neighbours worked out by hand (f16: 10 fraction bits, bf16: 7), not by
// the pass.

// CHECK-LABEL: func.func @f16_other
// CHECK-SAME:    (%[[X:.*]]: f32)
// CHECK:         %[[NARROW:.*]] = arith.truncf %[[X]] : f32 to f16
// CHECK:         %[[NEAREST:.*]] = arith.extf %[[NARROW]] : f16 to f32
// CHECK:         %[[BITS:.*]] = arith.bitcast %[[NARROW]] : f16 to i16
// CHECK:         arith.addi %[[BITS]]
// CHECK:         %[[INEXACT:.*]] = arith.cmpf one, %[[X]], %[[NEAREST]] : f32
// CHECK:         arith.select %[[INEXACT]]
func.func @f16_nearest(%x: f32) -> f32 {
  %r = flexsn.round %x to f16 : f32
  return %r : f32
}
func.func @f16_other(%x: f32) -> f32 {
  %r = flexsn.round %x to f16 other : f32
  return %r : f32
}
func.func @bf16_nearest(%x: f32) -> f32 {
  %r = flexsn.round %x to bf16 : f32
  return %r : f32
}
func.func @bf16_other(%x: f32) -> f32 {
  %r = flexsn.round %x to bf16 other : f32
  return %r : f32
}

// 1 - 2^-13, 1 + 2^-12, -(1 + 2^-12), 1 - 2^-10, 1.0, 7e4, 1e-8, -1e-8,
// 0, the largest f32, NaN.
memref.global "private" constant @xs : memref<11xf32> = dense<[
  0.9998779296875, 1.000244140625, -1.000244140625, 0.9990234375, 1.0,
  70000.0, 1.0e-8, -1.0e-8, 0.0, 3.4028234663852886e+38, 0x7FC00000]>

func.func private @printF32(f32)
func.func private @printComma()
func.func private @printNewline()

func.func @print_row(%round: (f32) -> f32) {
  %xs = memref.get_global @xs : memref<11xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c11 = arith.constant 11 : index
  scf.for %i = %c0 to %c11 step %c1 {
    %x = memref.load %xs[%i] : memref<11xf32>
    %y = func.call_indirect %round(%x) : (f32) -> f32
    func.call @printF32(%y) : (f32) -> ()
    func.call @printComma() : () -> ()
  }
  func.call @printNewline() : () -> ()
  return
}

func.func @main() {
  %a = func.constant @f16_nearest : (f32) -> f32
  func.call @print_row(%a) : ((f32) -> f32) -> ()
  %b = func.constant @f16_other : (f32) -> f32
  func.call @print_row(%b) : ((f32) -> f32) -> ()
  %c = func.constant @bf16_nearest : (f32) -> f32
  func.call @print_row(%c) : ((f32) -> f32) -> ()
  %d = func.constant @bf16_other : (f32) -> f32
  func.call @print_row(%d) : ((f32) -> f32) -> ()
  return
}

// VALUES: {{^}}1, 1, -1, 0.999023, 1, inf, 0, -0, 0, inf, nan,
// VALUES-NEXT: {{^}}0.999512, 1.00098, -1.00098, 0.999023, 1, 65504, 5.96046e-08, -5.96046e-08, 0, 65504, nan,
// VALUES-NEXT: {{^}}1, 1, -1, 1, 1, 70144, 1.00117e-08, -1.00117e-08, 0, inf, nan,
// VALUES-NEXT: {{^}}0.996094, 1.00781, -1.00781, 0.996094, 1, 69632, 9.95351e-09, -9.95351e-09, 0, 3.38953e+38, nan,
