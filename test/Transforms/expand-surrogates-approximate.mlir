// RUN: flexsn-opt %s --flexsn-expand-surrogates=approximate-functions | FileCheck %s
// RUN: flexsn-opt %s --flexsn-expand-surrogates | FileCheck %s --check-prefix=EXACT

// approximate-functions marks the ops of each surrogate's g(x) afn, and only
// those: the neuron's own division and the spike stay exact.

// CHECK-LABEL: func.func @sigmoid
// CHECK-SAME:    (%[[X:[^:]*]]: f32, %[[TAU:[^:]*]]: f32)
// CHECK:         %[[A:.*]] = arith.divf %[[X]], %[[TAU]] : f32
// CHECK:         %[[E:.*]] = math.exp %{{.*}} fastmath<afn> : f32
// CHECK:         %[[D:.*]] = arith.addf %[[E]], %{{.*}} fastmath<afn> : f32
// CHECK:         arith.divf %{{.*}}, %[[D]] fastmath<afn> : f32
// CHECK:         %[[FIRES:.*]] = arith.cmpf oge, %[[A]], %{{.*}} : f32
// CHECK-NEXT:    arith.select %[[FIRES]]
// EXACT-NOT:     fastmath
func.func @sigmoid(%x: f32, %tau: f32) -> (f32, f32, f32) {
  %a = arith.divf %x, %tau : f32
  %g = flexsn.surrogate_grad %a surrogate(#flexsn.sigmoid) : f32
  %s = flexsn.spike %a surrogate(#flexsn.sigmoid) : f32
  return %a, %g, %s : f32, f32, f32
}

// Every op of a composite g(x) is marked, whatever it is built from.
// CHECK-LABEL: func.func @atan
// CHECK-NOT:     arith.{{[a-z]+}}f %{{[^ ]+}}, %{{[^ ]+}} : f32
// CHECK:         arith.divf %{{[^ ]+}}, %{{[^ ]+}} fastmath<afn> : f32
// CHECK-NOT:     arith.{{[a-z]+}}f %{{[^ ]+}}, %{{[^ ]+}} : f32
// CHECK:         return
func.func @atan(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.atan) : f32
  return %g : f32
}
