// RUN: flexsn-opt %neurons/lif.mlir --flexsn-autodiff="storage-types=f32,f16,bf16" | FileCheck %s
// RUN: flexsn-opt %neurons/lif.mlir --flexsn-autodiff="storage-types=bf16 save-in-storage-type" --convert-flexsn-to-scf | FileCheck %s --check-prefix=SCF
// RUN: flexsn-opt %neurons/lif.mlir --flexsn-autodiff="storage-types=f16 save-in-storage-type=false" | FileCheck %s --check-prefix=F32SAVES
// RUN: flexsn-opt %neurons/lif.mlir --flexsn-set-params="values=soft_reset=true,detach_reset=true" --flexsn-autodiff="storage-types=f16 save-in-storage-type" | FileCheck %s --check-prefix=NODECISION

// save-in-storage-type (the default): LIF's saved charge h is a sequence of the storage
// type (an f32 kernel is unchanged), which the forward rounds to on its
// store and the backward widens back to f32 on its load. The forward picks
// the rounding: to nearest, unless the spike recomputed from the rounded h
// (which the backward reads in the reset's derivative) differs from its
// own; then the other neighbour of h.

// CHECK-LABEL: func.func @lif_forward_f32(
// CHECK-SAME:    %{{[^:]*}}: memref<?x?xf32>, %{{[^:]*}}: memref<?xf32>, %{{[^:]*}}: memref<?x?xf32>, %{{[^:]*}}: memref<?x?xf32>, %{{[^:]*}}: memref<?x?xf32>)
// CHECK-SAME:    <"saved0", saved_output, f32, sequence, saved 0>], workspace_sequences = 1>
// CHECK-LABEL: func.func @lif_backward_f32(
// CHECK-SAME:    <"saved0", saved_input, f32, sequence, saved 0>
// CHECK-LABEL: func.func @lif_forward_f16(
// CHECK-SAME:    %{{[^:]*}}: memref<?x?xf16>, %{{[^:]*}}: memref<?xf16>, %{{[^:]*}}: memref<?x?xf16>, %{{[^:]*}}: memref<?x?xf16>, %[[SAVED:[^:]*]]: memref<?x?xf16>)
// CHECK-SAME:    <"saved0", saved_output, f16, sequence, saved 0>], workspace_sequences = 1>
// CHECK:         flexsn.scan ins({{.*}}) inits({{.*}}) outs(%{{[^,]*}}, %[[SAVED]] : memref<?x?xf16>, memref<?x?xf16>)
// CHECK:           %[[H:.*]] = arith.addf
// CHECK:           %[[S:.*]] = flexsn.spike
// CHECK:           %[[NEAREST:.*]] = flexsn.round %[[H]] to f16 : f32
// CHECK-NEXT:      %[[OTHER:.*]] = flexsn.round %[[H]] to f16 other : f32
// CHECK-NEXT:      %[[OVER:.*]] = arith.subf %[[NEAREST]]
// CHECK-NEXT:      %[[AGAIN:.*]] = flexsn.spike %[[OVER]]
// CHECK-NEXT:      %[[DIFFERS:.*]] = arith.cmpf une, %[[S]], %[[AGAIN]] : f32
// CHECK-NEXT:      %[[KEPT:.*]] = arith.select %[[DIFFERS]], %[[OTHER]], %[[NEAREST]] : f32
// CHECK-NEXT:      flexsn.yield %[[S]], %[[KEPT]], %{{.*}} : f32, f32, f32
// CHECK-LABEL: func.func @lif_backward_f16(
// CHECK-SAME:    %{{[^:]*}}: memref<?x?xf16>, %{{[^:]*}}: memref<?x?xf16>, %[[IN:[^:]*]]: memref<?x?xf16>,
// CHECK-SAME:    <"saved0", saved_input, f16, sequence, saved 0>
// CHECK:         flexsn.scan reverse ins(%{{[^,]*}}, %{{[^,]*}}, %[[IN]] : memref<?x?xf16>, memref<?x?xf16>, memref<?x?xf16>)
// CHECK-NEXT:    ^bb0(%{{[^:]*}}: f32, %{{[^:]*}}: f32, %{{[^:]*}}: f32, %{{[^:]*}}: f32):
// CHECK-LABEL: func.func @lif_forward_bf16(
// CHECK-SAME:    <"saved0", saved_output, bf16, sequence, saved 0>], workspace_sequences = 1>
// CHECK-LABEL: func.func @lif_backward_bf16(
// CHECK-SAME:    <"saved0", saved_input, bf16, sequence, saved 0>

// SCF-LABEL: func.func @lif_forward_bf16(
// SCF-SAME:    %[[SAVED:[^:]*]]: memref<?x?xbf16>) {
// SCF:         %[[H:.*]] = arith.addf
// SCF:         flexsn.round %[[H]] to bf16 other : f32
// SCF:         %[[KEPT:.*]] = arith.select
// SCF:         %[[ROUNDED:.*]] = arith.truncf %[[KEPT]] : f32 to bf16
// SCF-NEXT:    memref.store %[[ROUNDED]], %[[SAVED]][%{{.*}}, %{{.*}}] : memref<?x?xbf16>
// SCF-LABEL: func.func @lif_backward_bf16(
// SCF-SAME:    %{{[^:]*}}: memref<?x?xbf16>, %{{[^:]*}}: memref<?x?xbf16>, %[[IN:[^:]*]]: memref<?x?xbf16>,
// SCF:         %[[LOADED:.*]] = memref.load %[[IN]][%{{.*}}, %{{.*}}] : memref<?x?xbf16>
// SCF-NEXT:    %[[WIDE:.*]] = arith.extf %[[LOADED]] : bf16 to f32
// SCF:         arith.subf %[[WIDE]]

// With save-in-storage-type=false saved values are f32 whatever the storage
// type, and nothing is rounded.
// F32SAVES-LABEL: func.func @lif_forward_f16(
// F32SAVES-SAME:    %{{[^:]*}}: memref<?x?xf32>)
// F32SAVES-SAME:    <"saved0", saved_output, f32, sequence, saved 0>
// F32SAVES-NOT:     flexsn.round
// F32SAVES-LABEL: func.func @lif_backward_f16(
// F32SAVES-SAME:    <"saved0", saved_input, f32, sequence, saved 0>

// With a detached soft reset the backward reads no decision (the reset's
// derivative is 1): h is saved rounded to nearest, by the store alone.
// NODECISION-LABEL: func.func @lif_forward_f16(
// NODECISION-NOT:     flexsn.round
// NODECISION:         flexsn.yield
// NODECISION-LABEL: func.func @lif_backward_f16(
