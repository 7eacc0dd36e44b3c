// RUN: flexsn-translate --flexsn-to-manifest %s | FileCheck %s
// RUN: flexsn-translate --flexsn-to-manifest %s | %python -c "import json, sys; m = json.load(sys.stdin); assert [n['name'] for n in m['neurons']] == ['two_state', 'stateless']"
// RUN: flexsn-translate --flexsn-to-manifest %neurons/lif.mlir | FileCheck %s --check-prefix=LIF

// The manifest lists each neuron's interface in declaration order, with
// parameter types, the defaults as written, their bindings and shapes.

// CHECK:      "format": "flexsn-manifest",
// CHECK-NEXT: "version": 12,
// CHECK:      "name": "two_state",
// CHECK:      "inputs": [
// CHECK-NEXT:   "current",
// CHECK-NEXT:   "gate"
// CHECK:      "states": [
// CHECK-NEXT:   "c",
// CHECK-NEXT:   "v"
// CHECK:      "outputs": [
// CHECK-NEXT:   "spike",
// CHECK-NEXT:   "trace"
// CHECK:        "name": "decay",
// CHECK-NEXT:   "type": "f32",
// CHECK-NEXT:   "default": 0.1,
// CHECK-NEXT:   "kind": "trainable",
// CHECK-NEXT:   "shape": "scalar"
// CHECK:        "name": "gain",
// CHECK-NEXT:   "type": "f32",
// CHECK-NEXT:   "default": -2.5,
// CHECK-NEXT:   "kind": "runtime",
// CHECK-NEXT:   "shape": "per_neuron"
// CHECK:        "name": "soft",
// CHECK-NEXT:   "type": "i1",
// CHECK-NEXT:   "default": true,
// CHECK-NEXT:   "kind": "const"
// CHECK:        "name": "window",
// CHECK-NEXT:   "type": "i32",
// CHECK-NEXT:   "default": 7,
// CHECK:      "name": "stateless",
// CHECK:      "states": [],
// CHECK:      "params": []
// CHECK:      "targets": {}

// LIF: "name": "lif",
// LIF: "name": "tau",
// LIF: "default": 2.0,

flexsn.neuron @two_state inputs(%current: f32, %gate: f32) states(%c: f32, %v: f32)
    outputs(spike, trace)
    params(%decay: f32 = 0.1 trainable, %gain: f32 = -2.5 runtime per_neuron,
           %soft: i1 = true, %window: i32 = 7) {
  %a = arith.mulf %c, %decay : f32
  %b = arith.mulf %current, %gain : f32
  %c1 = arith.addf %a, %b : f32
  %v1 = arith.addf %v, %c1 : f32
  %s = flexsn.spike %v1 surrogate(#flexsn.atan) : f32
  flexsn.yield %s, %gate, %c1, %v1 : f32, f32, f32, f32
}

flexsn.neuron @stateless inputs(%x: f32) outputs(y) {
  flexsn.yield %x : f32
}
