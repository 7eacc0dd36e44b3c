// RUN: flexsn-opt %s --split-input-file --convert-flexsn-to-scf=parallel=true --cse | FileCheck %s

// A total and a per-step sum: the chunks (4096 neurons of N) run in an OpenMP
// worksharing loop; each chunk sums its neurons' totals in order into its
// own partial (and its per-step sums into its own [chunk, t] row); after the
// loop the partials are added in chunk order, so no sum depends on how the
// chunks were shared out. A function that is not a kernel gets OpenMP's
// default thread count.
// CHECK-LABEL: func.func @sums
// CHECK-SAME:    (%[[X:[^:]+]]: memref<?x?xf32>, %[[Y:[^:]+]]: memref<?x?xf32>, %[[TOT:[^:]+]]: memref<f32>, %[[STEP:[^:]+]]: memref<?xf32>)
// CHECK-DAG:     %[[CHUNK:.*]] = arith.constant 4096 : index
// CHECK-DAG:     %[[T:.*]] = memref.dim %[[X]], %c0
// CHECK-DAG:     %[[N:.*]] = memref.dim %[[X]], %c1
// CHECK:         %[[CHUNKS:.*]] = arith.ceildivui %[[N]], %[[CHUNK]] : index
// CHECK:         %[[PTOT:.*]] = memref.alloc(%[[CHUNKS]]) : memref<?xf32>
// CHECK:         %[[PSTEP:.*]] = memref.alloc(%[[CHUNKS]], %[[T]]) : memref<?x?xf32>
// CHECK:         omp.parallel {
// CHECK-NEXT:      omp.wsloop schedule(static) {
// CHECK-NEXT:        omp.loop_nest (%[[C:.*]]) : index = (%c0) to (%[[CHUNKS]]) step (%c1) {
// CHECK:               %[[FIRST:.*]] = arith.muli %{{.*}}, %[[CHUNK]] : index
// CHECK:               %[[END:.*]] = arith.addi %[[FIRST]], %[[CHUNK]] : index
// CHECK:               %[[LAST:.*]] = arith.minui %[[END]], %[[N]] : index
// CHECK:               scf.for %[[TZ:.*]] = %c0 to %[[T]]
// CHECK-NEXT:            memref.store %{{.*}}, %[[PSTEP]][%[[C]], %[[TZ]]]
// CHECK:               %[[SUM:.*]] = scf.for %[[I:.*]] = %[[FIRST]] to %[[LAST]] step %c1 iter_args(%[[ACC:.*]] = %{{.*}}) -> (f32) {
// CHECK:                 scf.for %[[K:.*]] = %c0 to %[[T]] step %c1 iter_args(
// CHECK:                   memref.load %[[PSTEP]][%[[C]], %[[K]]]
// CHECK:                   memref.store %{{.*}}, %[[PSTEP]][%[[C]], %[[K]]]
// CHECK:                 arith.addf %[[ACC]], %{{.*}} : f32
// CHECK:               memref.store %[[SUM]], %[[PTOT]][%[[C]]] : memref<?xf32>
// CHECK:               omp.yield
// CHECK:           omp.terminator
// CHECK:         scf.for %[[C2:.*]] = %c0 to %[[CHUNKS]] step %c1 {
// CHECK:           %[[P:.*]] = memref.load %[[PTOT]][%[[C2]]]
// CHECK:           %[[OLD:.*]] = memref.load %[[TOT]][]
// CHECK:           arith.addf %[[OLD]], %[[P]]
// CHECK:           scf.for %[[K2:.*]] = %c0 to %[[T]]
// CHECK:             memref.load %[[PSTEP]][%[[C2]], %[[K2]]]
// CHECK:             memref.load %[[STEP]][%[[K2]]]
// CHECK:         memref.dealloc %[[PTOT]]
// CHECK:         memref.dealloc %[[PSTEP]]
func.func @sums(%x: memref<?x?xf32>, %y: memref<?x?xf32>, %total: memref<f32>,
                %per_step: memref<?xf32>) {
  flexsn.scan ins(%x : memref<?x?xf32>) outs(%y : memref<?x?xf32>)
      reductions(%total, %per_step : memref<f32>, memref<?xf32>)
      indexing_maps = [affine_map<(t, n) -> (t, n)>, affine_map<(t, n) -> (t, n)>,
                       affine_map<(t, n) -> ()>, affine_map<(t, n) -> (t)>] {
  ^bb0(%xi: f32):
    flexsn.yield %xi, %xi, %xi : f32, f32, f32
  }
  return
}

// -----

// A sum kept per neuron is added in place (each element belongs to one
// chunk): no partials. Neurons [B, S]: a chunk is 4096 neurons of S at one b.
// CHECK-LABEL: func.func @per_neuron
// CHECK-NOT:     memref.alloc
// CHECK:         omp.parallel
// CHECK:           omp.loop_nest
// CHECK:             arith.divui %{{.*}}, %[[BLOCKS:.*]] : index
// CHECK:             arith.remui
// CHECK:             arith.remui %{{.*}}, %[[BLOCKS]] : index
// CHECK:             memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<?x?xf32>
// CHECK-NOT:     memref.dealloc
func.func @per_neuron(%x: memref<?x?x?xf32>, %y: memref<?x?x?xf32>,
                      %count: memref<?x?xf32>) {
  flexsn.scan ins(%x : memref<?x?x?xf32>) outs(%y : memref<?x?x?xf32>)
      reductions(%count : memref<?x?xf32>)
      indexing_maps = [affine_map<(t, b, s) -> (t, b, s)>,
                       affine_map<(t, b, s) -> (t, b, s)>,
                       affine_map<(t, b, s) -> (b, s)>] {
  ^bb0(%xi: f32):
    flexsn.yield %xi, %xi : f32, f32
  }
  return
}

// -----

// A sum that keeps the innermost neuron dimension but not an outer one is
// shared by chunks at different outer points: the chunks run in order on
// one thread (no OpenMP region), adding in place.
// CHECK-LABEL: func.func @shared
// CHECK-NOT:     omp.parallel
// CHECK:         scf.for
// CHECK:           scf.for
// CHECK:             memref.load %{{.*}} : memref<?xf32>
func.func @shared(%x: memref<?x?x?xf32>, %y: memref<?x?x?xf32>,
                  %per_s: memref<?xf32>) {
  flexsn.scan ins(%x : memref<?x?x?xf32>) outs(%y : memref<?x?x?xf32>)
      reductions(%per_s : memref<?xf32>)
      indexing_maps = [affine_map<(t, b, s) -> (t, b, s)>,
                       affine_map<(t, b, s) -> (t, b, s)>,
                       affine_map<(t, b, s) -> (s)>] {
  ^bb0(%xi: f32):
    flexsn.yield %xi, %xi : f32, f32
  }
  return
}

// -----

// With vector-width, a chunk runs its whole vectors of neurons first, one
// time step at a time: their carries (the state, the total's sum over time)
// start in a buffer of the chunk, every step streams the vectors through
// the step body on vector<4xf32> lanes (flexsn.spike on the lanes, for
// flexsn-expand-surrogates; f16 extended and truncated as vectors; the
// scalar parameter broadcast) and puts the carries back, and the last pass
// stores the final states and adds each vector's total, summed over its
// lanes, to the chunk's sum; then the rest of the chunk one neuron at a time.
// The steps run twice over: with streaming (non-temporal, aligned) stores
// of the sequence, where its rows start at multiples of a vector's 8 bytes
// and the scan holds at least 4 Mi values, then a fence; else plain stores.
// RUN: flexsn-opt %s --split-input-file --convert-flexsn-to-scf="parallel=true vector-width=4" --cse | FileCheck %s --check-prefix=LANES
// LANES-LABEL: func.func @lanes
// LANES:         memref.extract_strided_metadata %{{.*}} : memref<?x?xf16>
// LANES:         %[[START:.*]] = arith.remui %{{.*}}, %c8 : index
// LANES:         arith.remui %{{.*}}#0, %c4 : index
// LANES:         %[[BIG:.*]] = arith.cmpi uge, %{{.*}}, %c4194304 : index
// LANES-NEXT:    %[[STREAM:.*]] = arith.andi %{{.*}}, %[[BIG]] : i1
// LANES:         omp.loop_nest
// LANES:           %[[FIRST:.*]] = arith.muli %{{.*}}, %c4096 : index
// LANES:           arith.divui %{{.*}}, %c4 : index
// LANES:           %[[END:.*]] = arith.addi %[[FIRST]], %{{.*}} : index
// LANES-NEXT:      %[[SUM:.*]] = memref.alloca_scope -> (f32) {
// LANES-NEXT:        %[[CARRIES:.*]] = memref.alloca() : memref<2x4096xf32>
// LANES-NEXT:        scf.for %[[I0:.*]] = %[[FIRST]] to %[[END]] step %c4 {
// LANES:               %[[V0:.*]] = vector.load %{{.*}}[%[[I0]]] : memref<?xf32>, vector<4xf32>
// LANES:               %[[SLOT0:.*]] = arith.subi %[[I0]], %[[FIRST]] : index
// LANES:               vector.store %{{.*}}, %[[CARRIES]][%c0, %[[SLOT0]]]
// LANES:               vector.store %{{.*}}, %[[CARRIES]][%c1, %[[SLOT0]]]
// LANES:             scf.if %[[STREAM]] {
// LANES-NEXT:          scf.for %[[K:.*]] = %c0 to %{{.*}} step %c1 {
// LANES-NEXT:          scf.for %[[I:.*]] = %[[FIRST]] to %[[END]] step %c4 {
// LANES:                 %[[TH:.*]] = vector.broadcast %{{.*}} : f32 to vector<4xf32>
// LANES:                 %[[V:.*]] = vector.load %[[CARRIES]][%c0, %{{.*}}] : memref<2x4096xf32>, vector<4xf32>
// LANES:                 %[[X:.*]] = vector.load %{{.*}}[%[[K]], %[[I]]] : memref<?x?xf16>, vector<4xf16>
// LANES:                 %[[XF:.*]] = arith.extf %[[X]] : vector<4xf16> to vector<4xf32>
// LANES:                 %[[H:.*]] = arith.addf %[[V]], %[[XF]] : vector<4xf32>
// LANES:                 %[[D:.*]] = arith.subf %[[H]], %[[TH]] : vector<4xf32>
// LANES:                 %[[S:.*]] = flexsn.spike %[[D]] surrogate(#flexsn.sigmoid) : vector<4xf32>
// LANES:                 %[[ST:.*]] = arith.truncf %[[S]] : vector<4xf32> to vector<4xf16>
// LANES:                 vector.store %[[ST]], %{{.*}}[%[[K]], %[[I]]] {alignment = 8 : i64, nontemporal = true} : memref<?x?xf16>, vector<4xf16>
// LANES:                 vector.store %[[H]], %[[CARRIES]][%c0, %{{.*}}] : memref<2x4096xf32>
// LANES:               llvm.fence seq_cst
// LANES-NEXT:        } else {
// LANES-NEXT:          scf.for %[[K2:.*]] = %c0 to %{{.*}} step %c1 {
// LANES:                 vector.store %{{.*}}, %{{.*}}[%[[K2]], %{{.*}}] : memref<?x?xf16>, vector<4xf16>
// LANES:             scf.for %{{.*}} = %[[FIRST]] to %[[END]] step %c4 iter_args(%{{.*}} = %{{.*}}) -> (f32) {
// LANES:               vector.store %{{.*}}, %{{.*}} : memref<?xf32>, vector<4xf32>
// LANES:               vector.reduction <add>, %{{.*}} : vector<4xf32> into f32
// LANES:             memref.alloca_scope.return
// LANES:           scf.for %{{.*}} = %[[END]] to %{{.*}} step %c1 iter_args(%{{.*}} = %[[SUM]]) -> (f32) {
// LANES:             memref.load %{{.*}} : memref<?x?xf16>
func.func @lanes(%x: memref<?x?xf16>, %v0: memref<?xf32>, %th: f32,
                 %s: memref<?x?xf16>, %vf: memref<?xf32>, %total: memref<f32>) {
  flexsn.scan ins(%x : memref<?x?xf16>) inits(%v0 : memref<?xf32>)
      params(%th : f32) outs(%s : memref<?x?xf16>) states(%vf : memref<?xf32>)
      reductions(%total : memref<f32>) {
  ^bb0(%xi: f32, %v: f32, %t: f32):
    %h = arith.addf %v, %xi : f32
    %d = arith.subf %h, %t : f32
    %sp = flexsn.spike %d surrogate(#flexsn.sigmoid) : f32
    flexsn.yield %sp, %h, %sp : f32, f32, f32
  }
  return
}

// -----

// No vectors where a buffer is not contiguous along the neurons (a dynamic
// innermost stride), or where spikes are packed 8 per byte: one neuron at a
// time.
// LANES-LABEL: func.func @strided
// LANES-NOT:     vector.
// LANES:         return
func.func @strided(%x: memref<?x?xf32, strided<[?, ?]>>, %y: memref<?x?xf32>) {
  flexsn.scan ins(%x : memref<?x?xf32, strided<[?, ?]>>) outs(%y : memref<?x?xf32>) {
  ^bb0(%xi: f32):
    flexsn.yield %xi : f32
  }
  return
}

// LANES-LABEL: func.func @bits
// LANES-NOT:     vector.
// LANES:         return
func.func @bits(%x: memref<?x?xf32>, %y: memref<?x?xi1>) {
  flexsn.scan ins(%x : memref<?x?xf32>) outs(%y : memref<?x?xi1>) {
  ^bb0(%xi: f32):
    %s = flexsn.spike %xi surrogate(#flexsn.sigmoid) : f32
    flexsn.yield %s : f32
  }
  return
}
