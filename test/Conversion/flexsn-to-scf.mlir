// RUN: flexsn-opt %s --split-input-file --convert-flexsn-to-scf --cse | FileCheck %s
// RUN: flexsn-opt %s --split-input-file --convert-flexsn-to-scf | FileCheck %s --check-prefix=GONE

// After the pass no scan, apply or neuron is left; per-step ops (spike) stay
// for flexsn-expand-surrogates.
// GONE-NOT: flexsn.scan
// GONE-NOT: flexsn.neuron
// GONE-NOT: flexsn.apply

// A scan of a neuron: the neuron loop runs over dim 1 of the first input, the
// time loop inside it over dim 0, carrying the state; const parameters become
// constants, runtime ones are used as they are; every buffer that may be
// absent is tested once for a null base pointer, and guards its loads/stores.
// CHECK-LABEL: func.func @callee
// CHECK-SAME:    (%[[X:[^:]+]]: memref<?x?xf32>, %[[V0:[^:]+]]: memref<?xf32>,
// CHECK-SAME:     %[[S:[^:]+]]: memref<?x?xf32>, %[[VS:[^:]+]]: memref<?x?xf32>,
// CHECK-SAME:     %[[VTH:[^:]+]]: f32)
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG:     %[[T:.*]] = memref.dim %[[X]], %[[C0]]
// CHECK-DAG:     %[[N:.*]] = memref.dim %[[X]], %[[C1]]
// CHECK-DAG:     %[[P_V0:.*]] = memref.extract_aligned_pointer_as_index %[[V0]]
// CHECK-DAG:     %[[HAS_V0:.*]] = arith.cmpi ne, %[[P_V0]], %[[C0]] : index
// CHECK-DAG:     %[[P_S:.*]] = memref.extract_aligned_pointer_as_index %[[S]]
// CHECK-DAG:     %[[HAS_S:.*]] = arith.cmpi ne, %[[P_S]], %[[C0]] : index
// CHECK-DAG:     %[[P_VS:.*]] = memref.extract_aligned_pointer_as_index %[[VS]]
// CHECK-DAG:     %[[HAS_VS:.*]] = arith.cmpi ne, %[[P_VS]], %[[C0]] : index
// CHECK:         scf.for %[[I:[^ ]+]] = %[[C0]] to %[[N]] step %[[C1]] {
// CHECK:           %[[INIT:.*]] = scf.if %[[HAS_V0]] -> (f32) {
// CHECK:             %[[LOADED:.*]] = memref.load %[[V0]][%[[I]]] : memref<?xf32>
// CHECK:             scf.yield %[[LOADED]] : f32
// CHECK:           } else {
// CHECK:             %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:             scf.yield %[[ZERO]] : f32
// CHECK:           }
// CHECK:           scf.for %[[K:[^ ]+]] = %[[C0]] to %[[T]] step %[[C1]] iter_args(%[[V:[^ ,)]+]] = %[[INIT]]) -> (f32) {
// CHECK-DAG:         %[[XK:.*]] = memref.load %[[X]][%[[K]], %[[I]]] : memref<?x?xf32>
// CHECK-DAG:         %[[TAU:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-DAG:         %[[HARD:.*]] = arith.constant false
// CHECK:             %[[DV:.*]] = arith.divf %[[V]], %[[TAU]] : f32
// CHECK:             %[[H:.*]] = arith.addf %[[DV]], %[[XK]] : f32
// CHECK:             %[[OVER:.*]] = arith.subf %[[H]], %[[VTH]] : f32
// CHECK:             %[[SPIKE:.*]] = flexsn.spike %[[OVER]]
// CHECK:             %[[V1:.*]] = arith.select %[[HARD]], %{{.*}}, %[[H]] : f32
// CHECK:             scf.if %[[HAS_S]] {
// CHECK-NEXT:          memref.store %[[SPIKE]], %[[S]][%[[K]], %[[I]]] : memref<?x?xf32>
// CHECK:             scf.if %[[HAS_VS]] {
// CHECK-NEXT:          memref.store %[[V1]], %[[VS]][%[[K]], %[[I]]] : memref<?x?xf32>
// CHECK:             scf.yield %[[V1]] : f32
flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(spike)
    params(%tau: f32 = 2.0, %v_th: f32 = 1.0 runtime, %hard: i1 = false) {
  %dv = arith.divf %v, %tau : f32
  %h = arith.addf %dv, %x : f32
  %over = arith.subf %h, %v_th : f32
  %s = flexsn.spike %over surrogate(#flexsn.sigmoid) : f32
  %zero = arith.constant 0.0 : f32
  %v1 = arith.select %hard, %zero, %h : f32
  flexsn.yield %s, %v1 : f32, f32
}

func.func @callee(%x: memref<?x?xf32>, %v0: memref<?xf32>, %s: memref<?x?xf32>,
                  %vs: memref<?x?xf32>, %v_th: f32) {
  flexsn.scan @lif ins(%x : memref<?x?xf32>) inits(%v0 : memref<?xf32>)
      params(%v_th : f32) outs(%s : memref<?x?xf32>) states(%vs : memref<?x?xf32>)
  return
}

// -----

// f16/bf16 buffers load through arith.extf and store through arith.truncf,
// i8 outputs store the value converted by arith.fptoui, and final states are
// stored once per neuron after the time loop.
// CHECK-LABEL: func.func @storage
// CHECK-SAME:    (%[[X:[^:]+]]: memref<?x?xf16>, %[[V0:[^:]+]]: memref<?xbf16>,
// CHECK-SAME:     %[[S:[^:]+]]: memref<?x?xi8>, %[[VF:[^:]+]]: memref<?xf16>)
// CHECK:         %[[P_VF:.*]] = memref.extract_aligned_pointer_as_index %[[VF]]
// CHECK-NEXT:    %[[HAS_VF:.*]] = arith.cmpi ne, %[[P_VF]], %{{.*}} : index
// CHECK:         scf.for %[[I:[^ ]+]] = {{.*}} {
// CHECK:           %[[INIT:.*]] = scf.if %{{.*}} -> (f32) {
// CHECK:             %[[RAW0:.*]] = memref.load %[[V0]][%[[I]]] : memref<?xbf16>
// CHECK:             %[[EXT0:.*]] = arith.extf %[[RAW0]] : bf16 to f32
// CHECK:             scf.yield %[[EXT0]] : f32
// CHECK:           %[[FINAL:.*]] = scf.for %[[K:[^ ]+]] = {{.*}} iter_args(%[[V:[^ ,)]+]] = %[[INIT]]) -> (f32) {
// CHECK:             %[[RAW:.*]] = memref.load %[[X]][%[[K]], %[[I]]] : memref<?x?xf16>
// CHECK:             %[[XK:.*]] = arith.extf %[[RAW]] : f16 to f32
// CHECK:             %[[H:.*]] = arith.addf %[[V]], %[[XK]] : f32
// CHECK:             %[[SPIKE:.*]] = flexsn.spike %[[H]]
// CHECK:             scf.if %{{.*}} {
// CHECK-NEXT:          %[[BYTE:.*]] = arith.fptoui %[[SPIKE]] : f32 to i8
// CHECK-NEXT:          memref.store %[[BYTE]], %[[S]][%[[K]], %[[I]]] : memref<?x?xi8>
// CHECK-NOT:         memref.store
// CHECK:             scf.yield %[[H]] : f32
// CHECK:           }
// CHECK:           scf.if %[[HAS_VF]] {
// CHECK-NEXT:        %[[HALF:.*]] = arith.truncf %[[FINAL]] : f32 to f16
// CHECK-NEXT:        memref.store %[[HALF]], %[[VF]][%[[I]]] : memref<?xf16>
flexsn.neuron @acc inputs(%x: f32) states(%v: f32) outputs(spike) {
  %h = arith.addf %v, %x : f32
  %s = flexsn.spike %h surrogate(#flexsn.sigmoid) : f32
  flexsn.yield %s, %h : f32, f32
}

func.func @storage(%x: memref<?x?xf16>, %v0: memref<?xbf16>, %s: memref<?x?xi8>,
                   %vf: memref<?xf16>) {
  flexsn.scan @acc ins(%x : memref<?x?xf16>) inits(%v0 : memref<?xbf16>)
      outs(%s : memref<?x?xi8>) states(%vf : memref<?xf16>)
  return
}

// -----

// Without inits, the states start from 0.0 and no initial state is loaded.
// CHECK-LABEL: func.func @no_inits
// CHECK:         scf.for %{{.*}} = {{.*}} {
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      scf.for %{{.*}} = {{.*}} iter_args(%{{.*}} = %[[ZERO]]) -> (f32) {
flexsn.neuron @acc inputs(%x: f32) states(%v: f32) outputs(spike) {
  %h = arith.addf %v, %x : f32
  %s = flexsn.spike %h surrogate(#flexsn.sigmoid) : f32
  flexsn.yield %s, %h : f32, f32
}

func.func @no_inits(%x: memref<?x?xf32>, %s: memref<?x?xf32>) {
  flexsn.scan @acc ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>)
  return
}

// -----

// A reverse scan visits step T-1-t at iteration t, for loads and stores alike.
// CHECK-LABEL: func.func @reverse
// CHECK-SAME:    (%[[X:[^:]+]]: memref<?x?xf32>, %[[S:[^:]+]]: memref<?x?xf32>)
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG:     %[[T:.*]] = memref.dim %[[X]], %[[C0:[^ ]*]] :
// CHECK:         scf.for %[[I:[^ ]+]] = {{.*}} {
// CHECK:           scf.for %[[K:[^ ]+]] = %[[C0]] to %[[T]] step %[[C1]] iter_args
// CHECK:             %[[LAST:.*]] = arith.subi %[[T]], %[[C1]] : index
// CHECK:             %[[STEP:.*]] = arith.subi %[[LAST]], %[[K]] : index
// CHECK:             memref.load %[[X]][%[[STEP]], %[[I]]]
// CHECK:             memref.store %{{.*}}, %[[S]][%[[STEP]], %[[I]]]
flexsn.neuron @acc inputs(%x: f32) states(%v: f32) outputs(spike) {
  %h = arith.addf %v, %x : f32
  %s = flexsn.spike %h surrogate(#flexsn.sigmoid) : f32
  flexsn.yield %s, %h : f32, f32
}

func.func @reverse(%x: memref<?x?xf32>, %s: memref<?x?xf32>) {
  flexsn.scan reverse @acc ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>)
  return
}

// -----

// A 3-D sequence [T, N1, N2] gives two neuron loops; [N1, N2] inits and the
// sequences are indexed by both.
// CHECK-LABEL: func.func @three_d
// CHECK-SAME:    (%[[X:[^:]+]]: memref<?x?x?xf32>, %[[V0:[^:]+]]: memref<?x?xf32>,
// CHECK-SAME:     %[[S:[^:]+]]: memref<?x?x?xf32>)
// CHECK-DAG:     %[[T:.*]] = memref.dim %[[X]], %[[C0:[^ ]*]] :
// CHECK-DAG:     %[[N1:.*]] = memref.dim %[[X]], %[[C1:[^ ]*]] :
// CHECK-DAG:     %[[C2:.*]] = arith.constant 2 : index
// CHECK-DAG:     %[[N2:.*]] = memref.dim %[[X]], %[[C2]] :
// CHECK:         scf.for %[[I:[^ ]+]] = %[[C0]] to %[[N1]] step %[[C1]] {
// CHECK-NEXT:      scf.for %[[J:[^ ]+]] = %[[C0]] to %[[N2]] step %[[C1]] {
// CHECK:             memref.load %[[V0]][%[[I]], %[[J]]] : memref<?x?xf32>
// CHECK:             scf.for %[[K:[^ ]+]] = %[[C0]] to %[[T]] step %[[C1]] iter_args
// CHECK:               memref.load %[[X]][%[[K]], %[[I]], %[[J]]] : memref<?x?x?xf32>
// CHECK:               memref.store %{{.*}}, %[[S]][%[[K]], %[[I]], %[[J]]] : memref<?x?x?xf32>
flexsn.neuron @acc inputs(%x: f32) states(%v: f32) outputs(spike) {
  %h = arith.addf %v, %x : f32
  %s = flexsn.spike %h surrogate(#flexsn.sigmoid) : f32
  flexsn.yield %s, %h : f32, f32
}

func.func @three_d(%x: memref<?x?x?xf32>, %v0: memref<?x?xf32>,
                   %s: memref<?x?x?xf32>) {
  flexsn.scan @acc ins(%x : memref<?x?x?xf32>) inits(%v0 : memref<?x?xf32>)
      outs(%s : memref<?x?x?xf32>)
  return
}

// -----

// An inline body gets the inputs, states and params as its arguments; each
// reduction buffer is zeroed before the loops, summed over time in an
// iteration argument, and that sum is added into the buffer after the time loop.
// CHECK-LABEL: func.func @inline
// CHECK-SAME:    (%[[GS:[^:]+]]: memref<?x?xf32>, %[[HS:[^:]+]]: memref<?x?xf16>,
// CHECK-SAME:     %{{[^:]+}}: memref<?xf32>, %{{[^:]+}}: memref<?x?xf32>,
// CHECK-SAME:     %[[GF:[^:]+]]: memref<?xf32>, %[[R0:[^:]+]]: memref<f32>,
// CHECK-SAME:     %[[R1:[^:]+]]: memref<f32>, %[[TAU:[^:]+]]: f32, %[[D:[^:]+]]: i1)
// CHECK:         %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    memref.store %[[ZERO]], %[[R0]][] : memref<f32>
// CHECK-NEXT:    memref.store %[[ZERO]], %[[R1]][] : memref<f32>
// CHECK:         scf.for %[[I:[^ ]+]] = {{.*}} {
// CHECK:           %[[INIT:.*]] = scf.if
// CHECK:           %[[SUMS:.*]]:3 = scf.for %{{.*}} iter_args(%[[G:[^ ,)]+]] = %[[INIT]], %[[ACC0:[^ ,)]+]] = %[[ZERO]], %[[ACC1:[^ ,)]+]] = %[[ZERO]]) -> (f32, f32, f32) {
// CHECK:             %[[A:.*]] = memref.load %[[GS]]
// CHECK:             %[[HRAW:.*]] = memref.load %[[HS]]
// CHECK:             %[[HV:.*]] = arith.extf %[[HRAW]] : f16 to f32
// CHECK:             %[[PSI:.*]] = flexsn.surrogate_grad %[[HV]]
// CHECK:             %[[KEEP:.*]] = arith.select %[[D]], %{{.*}}, %[[PSI]] : f32
// CHECK:             %[[B:.*]] = arith.mulf %[[G]], %[[KEEP]] : f32
// CHECK:             %[[GH:.*]] = arith.addf %[[A]], %[[B]] : f32
// CHECK:             %[[GX:.*]] = arith.divf %[[GH]], %[[TAU]] : f32
// CHECK:             %[[GT:.*]] = arith.mulf %[[GX]], %[[HV]] : f32
// CHECK-DAG:         %[[NEXT0:.*]] = arith.addf %[[ACC0]], %[[GT]] : f32
// CHECK-DAG:         %[[NEXT1:.*]] = arith.addf %[[ACC1]], %[[PSI]] : f32
// CHECK:             scf.yield %[[GH]], %[[NEXT0]], %[[NEXT1]] : f32, f32, f32
// CHECK:           }
// CHECK:           memref.store %[[SUMS]]#0, %[[GF]][%[[I]]] : memref<?xf32>
// CHECK:           %[[OLD0:.*]] = memref.load %[[R0]][] : memref<f32>
// CHECK:           %[[NEW0:.*]] = arith.addf %[[OLD0]], %[[SUMS]]#1 : f32
// CHECK:           memref.store %[[NEW0]], %[[R0]][] : memref<f32>
// CHECK:           %[[OLD1:.*]] = memref.load %[[R1]][] : memref<f32>
// CHECK:           %[[NEW1:.*]] = arith.addf %[[OLD1]], %[[SUMS]]#2 : f32
// CHECK:           memref.store %[[NEW1]], %[[R1]][] : memref<f32>
func.func @inline(%gs: memref<?x?xf32>, %h: memref<?x?xf16>, %g0: memref<?xf32>,
                  %gx: memref<?x?xf32>, %gf: memref<?xf32>, %gtau: memref<f32>,
                  %psum: memref<f32>, %tau: f32, %d: i1) {
  flexsn.scan reverse ins(%gs, %h : memref<?x?xf32>, memref<?x?xf16>)
      inits(%g0 : memref<?xf32>) params(%tau, %d : f32, i1)
      outs(%gx : memref<?x?xf32>) states(%gf : memref<?xf32>)
      reductions(%gtau, %psum : memref<f32>, memref<f32>) {
  ^bb0(%a: f32, %hv: f32, %g: f32, %t: f32, %dd: i1):
    %psi = flexsn.surrogate_grad %hv surrogate(#flexsn.sigmoid) : f32
    %one = arith.constant 1.0 : f32
    %keep = arith.select %dd, %one, %psi : f32
    %b = arith.mulf %g, %keep : f32
    %gh = arith.addf %a, %b : f32
    %gxv = arith.divf %gh, %t : f32
    %gt = arith.mulf %gxv, %hv : f32
    flexsn.yield %gxv, %gh, %gt, %psi : f32, f32, f32, f32
  }
  return
}

// -----

// flexsn.apply is inlined (recursively, with its parameters as operands):
// two applications of @leak give two multiply-adds, each on its own state.
// CHECK-LABEL: func.func @apply
// CHECK-SAME:    (%[[X:[^:]+]]: memref<?x?xf32>, %[[Y:[^:]+]]: memref<?x?xf32>)
// CHECK:         scf.for %[[K:[^ ]+]] = {{.*}} iter_args(%[[V:[^ ,)]+]] = %[[Z:[^ ,)]+]], %[[W:[^ ,)]+]] = %[[Z]]) -> (f32, f32) {
// CHECK:           %[[XK:.*]] = memref.load %[[X]]
// CHECK:           %[[Q:.*]] = arith.constant 2.500000e-01 : f32
// CHECK:           %[[KV:.*]] = arith.mulf %[[V]], %[[Q]] : f32
// CHECK:           %[[V1:.*]] = arith.addf %[[KV]], %[[XK]] : f32
// CHECK:           %[[KW:.*]] = arith.mulf %[[W]], %[[Q]] : f32
// CHECK:           %[[W1:.*]] = arith.addf %[[KW]], %[[V1]] : f32
// CHECK:           memref.store %[[W1]], %[[Y]]
// CHECK:           scf.yield %[[V1]], %[[W1]] : f32, f32
flexsn.neuron @leak inputs(%x: f32) states(%v: f32) outputs(y) params(%k: f32 = 0.5) {
  %kv = arith.mulf %v, %k : f32
  %h = arith.addf %kv, %x : f32
  flexsn.yield %h, %h : f32, f32
}

flexsn.neuron @pair inputs(%x: f32) states(%v: f32, %w: f32) outputs(y) {
  %k = arith.constant 0.25 : f32
  %y, %v1 = flexsn.apply @leak(%x, %v, %k) : (f32, f32, f32) -> (f32, f32)
  %z, %w1 = flexsn.apply @leak(%y, %w, %k) : (f32, f32, f32) -> (f32, f32)
  flexsn.yield %z, %v1, %w1 : f32, f32, f32
}

func.func @apply(%x: memref<?x?xf32>, %y: memref<?x?xf32>) {
  flexsn.scan @pair ins(%x : memref<?x?xf32>) outs(%y : memref<?x?xf32>)
  return
}

// -----

// An inline body may use and yield values defined above the scan.
// CHECK-LABEL: func.func @captures(
// CHECK-SAME:    %{{[^:]+}}: memref<?x?xf32>, %[[Y:[^:]+]]: memref<?x?xf32>, %[[K:[^:]+]]: f32)
// CHECK:         scf.for
// CHECK:           scf.for
// CHECK:             memref.store %[[K]], %[[Y]]
func.func @captures(%x: memref<?x?xf32>, %y: memref<?x?xf32>, %k: f32) {
  flexsn.scan ins(%x : memref<?x?xf32>) outs(%y : memref<?x?xf32>) {
  ^bb0(%a: f32):
    flexsn.yield %k : f32
  }
  return
}

// -----

// Operands are indexed through their maps: the weight by channel, the
// initial states per neuron and as one scalar; the sequence state is stored every step, the
// final one after the time loop; the per-channel sum is zeroed, carried over
// time and added per neuron, the per-step sum added every step.
// CHECK-LABEL: func.func @maps(
// CHECK-SAME:    %[[X:[^:]+]]: memref<?x?x?xf32>, %[[W:[^:]+]]: memref<?xf32>, %[[V0:[^:]+]]: memref<?x?xf32>,
// CHECK-SAME:    %[[K0:[^:]+]]: memref<f32>,
// CHECK-SAME:    %[[Y:[^:]+]]: memref<?x?x?xf32>, %[[VF:[^:]+]]: memref<?x?xf32>, %[[KS:[^:]+]]: memref<?x?x?xf32>,
// CHECK-SAME:    %[[RC:[^:]+]]: memref<?xf32>, %[[RT:[^:]+]]: memref<?xf32>)
// CHECK:         scf.for %[[I:.+]] = %{{.+}} to %{{.+}} step
// CHECK-NEXT:      memref.store %{{.+}}, %[[RC]][%[[I]]]
// CHECK:         scf.for %[[I:.+]] = %{{.+}} to %{{.+}} step
// CHECK-NEXT:      memref.store %{{.+}}, %[[RT]][%[[I]]]
// CHECK:         scf.for %[[C:.+]] = %{{.+}} to %{{.+}} step
// CHECK:           scf.for %[[N:.+]] = %{{.+}} to %{{.+}} step
// CHECK:             memref.load %[[V0]][%[[C]], %[[N]]]
// CHECK:             memref.load %[[K0]][]
// CHECK:             %[[LOOP:.+]]:3 = scf.for %[[T:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(
// CHECK-DAG:           memref.load %[[X]][%[[T]], %[[C]], %[[N]]]
// CHECK-DAG:           memref.load %[[W]][%[[C]]]
// CHECK:               memref.store %{{.+}}, %[[Y]][%[[T]], %[[C]], %[[N]]]
// CHECK:               memref.store %{{.+}}, %[[KS]][%[[T]], %[[C]], %[[N]]]
// CHECK:               memref.load %[[RT]][%[[T]]]
// CHECK:               memref.store %{{.+}}, %[[RT]][%[[T]]]
// CHECK:               scf.yield
// CHECK:             memref.store %[[LOOP]]#0, %[[VF]][%[[C]], %[[N]]]
// CHECK:             %[[OLD:.+]] = memref.load %[[RC]][%[[C]]]
// CHECK:             %[[NEW:.+]] = arith.addf %[[OLD]], %[[LOOP]]#2
// CHECK:             memref.store %[[NEW]], %[[RC]][%[[C]]]
func.func @maps(%x: memref<?x?x?xf32>, %w: memref<?xf32>, %v0: memref<?x?xf32>,
                %k0: memref<f32>, %y: memref<?x?x?xf32>, %vf: memref<?x?xf32>, %ks: memref<?x?x?xf32>,
                %rc: memref<?xf32>, %rt: memref<?xf32>) {
  flexsn.scan ins(%x, %w : memref<?x?x?xf32>, memref<?xf32>) inits(%v0, %k0 : memref<?x?xf32>, memref<f32>)
      outs(%y : memref<?x?x?xf32>) states(%vf, %ks : memref<?x?xf32>, memref<?x?x?xf32>)
      reductions(%rc, %rt : memref<?xf32>, memref<?xf32>)
      indexing_maps = [affine_map<(t, c, n) -> (t, c, n)>, affine_map<(t, c, n) -> (c)>,
                       affine_map<(t, c, n) -> (c, n)>, affine_map<(t, c, n) -> ()>,
                       affine_map<(t, c, n) -> (t, c, n)>,
                       affine_map<(t, c, n) -> (c, n)>, affine_map<(t, c, n) -> (t, c, n)>,
                       affine_map<(t, c, n) -> (c)>, affine_map<(t, c, n) -> (t)>] {
  ^bb0(%xi: f32, %wi: f32, %v: f32, %k: f32):
    %p = arith.mulf %xi, %wi : f32
    %v1 = arith.addf %v, %p : f32
    %k1 = arith.addf %k, %xi : f32
    flexsn.yield %v1, %v1, %k1, %p, %p : f32, f32, f32, f32, f32
  }
  return
}
