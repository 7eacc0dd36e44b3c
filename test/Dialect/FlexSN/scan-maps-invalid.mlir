// RUN: flexsn-opt %s -split-input-file -verify-diagnostics

// Misuses of flexsn.scan's indexing maps and of its value form.

// One map per operand, params included.
func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op has 1 indexing maps for 2 operands}}
  flexsn.scan ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>)
      indexing_maps = [affine_map<(t, n) -> (t, n)>] {
  ^bb0(%a: f32):
    flexsn.yield %a : f32
  }
  return
}

// -----

// Every map takes the whole domain.
func.func @f(%x: memref<?x?xf32>, %w: memref<?xf32>, %s: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op indexing map of input #1 affine_map<(d0) -> (d0)> must take the 2 domain dimensions (t, n...) and no symbols}}
  flexsn.scan ins(%x, %w : memref<?x?xf32>, memref<?xf32>) outs(%s : memref<?x?xf32>)
      indexing_maps = [affine_map<(t, n) -> (t, n)>, affine_map<(n) -> (n)>,
                       affine_map<(t, n) -> (t, n)>] {
  ^bb0(%a: f32, %b: f32):
    flexsn.yield %a : f32
  }
  return
}

// -----

// Maps keep dimensions; they do not compute with them.
func.func @f(%x: memref<?x?xf32>, %w: memref<?xf32>, %s: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op indexing map of input #1 affine_map<(d0, d1) -> (d1 + 1)> must keep domain dimensions, not compute with them}}
  flexsn.scan ins(%x, %w : memref<?x?xf32>, memref<?xf32>) outs(%s : memref<?x?xf32>)
      indexing_maps = [affine_map<(t, n) -> (t, n)>, affine_map<(t, n) -> (n + 1)>,
                       affine_map<(t, n) -> (t, n)>] {
  ^bb0(%a: f32, %b: f32):
    flexsn.yield %a : f32
  }
  return
}

// -----

// Kept dimensions come once each, in order: no transposes.
func.func @f(%x: memref<?x?x?xf32>, %y: memref<?x?x?xf32>, %s: memref<?x?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op indexing map of input #1 affine_map<(d0, d1, d2) -> (d0, d2, d1)> must keep domain dimensions once each, in order}}
  flexsn.scan ins(%x, %y : memref<?x?x?xf32>, memref<?x?x?xf32>) outs(%s : memref<?x?x?xf32>)
      indexing_maps = [affine_map<(t, c, n) -> (t, c, n)>, affine_map<(t, c, n) -> (t, n, c)>,
                       affine_map<(t, c, n) -> (t, c, n)>] {
  ^bb0(%a: f32, %b: f32):
    flexsn.yield %a : f32
  }
  return
}

// -----

// A map gives one index per operand dimension.
func.func @f(%x: memref<?x?x?xf32>, %w: memref<?x?xf32>, %s: memref<?x?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op input #1 has rank 2, but its indexing map affine_map<(d0, d1, d2) -> (d1)> gives 1 indices}}
  flexsn.scan ins(%x, %w : memref<?x?x?xf32>, memref<?x?xf32>) outs(%s : memref<?x?x?xf32>)
      indexing_maps = [affine_map<(t, c, n) -> (t, c, n)>, affine_map<(t, c, n) -> (c)>,
                       affine_map<(t, c, n) -> (t, c, n)>] {
  ^bb0(%a: f32, %b: f32):
    flexsn.yield %a : f32
  }
  return
}

// -----

// A broadcast's static size agrees with the domain dimension it follows.
func.func @f(%x: memref<?x4x?xf32>, %w: memref<3xf32>, %s: memref<?x?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op input #1 has size 3 in dimension 0, but input #0 gives domain dimension d1 size 4}}
  flexsn.scan ins(%x, %w : memref<?x4x?xf32>, memref<3xf32>) outs(%s : memref<?x?x?xf32>)
      indexing_maps = [affine_map<(t, c, n) -> (t, c, n)>, affine_map<(t, c, n) -> (c)>,
                       affine_map<(t, c, n) -> (t, c, n)>] {
  ^bb0(%a: f32, %b: f32):
    flexsn.yield %a : f32
  }
  return
}

// -----

// A broadcast input needs its map: rank 1 in a rank-3 domain implies none.
func.func @f(%x: memref<?x?x?xf32>, %w: memref<?xf32>, %s: memref<?x?x?xf32>) {
  // expected-error@+1 {{input #1 has rank 1, which implies no indexing map in a domain of rank 3 (the first input's): expected rank 3, or give 'indexing_maps'}}
  flexsn.scan ins(%x, %w : memref<?x?x?xf32>, memref<?xf32>) outs(%s : memref<?x?x?xf32>) {
  ^bb0(%a: f32, %b: f32):
    flexsn.yield %a : f32
  }
  return
}

// -----

// Initial states hold the state before the first step: they do not depend
// on t.
func.func @f(%x: memref<?x?xf32>, %v0: memref<?xf32>, %s: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op initial state #0 must not depend on t: its map is affine_map<(d0, d1) -> (d0)>}}
  flexsn.scan ins(%x : memref<?x?xf32>) inits(%v0 : memref<?xf32>) outs(%s : memref<?x?xf32>)
      indexing_maps = [affine_map<(t, n) -> (t, n)>, affine_map<(t, n) -> (t)>,
                       affine_map<(t, n) -> (t, n)>] {
  ^bb0(%a: f32, %v: f32):
    flexsn.yield %a, %v : f32, f32
  }
  return
}

// -----

// A scalar param has the empty map.
func.func @f(%x: memref<?x?xf32>, %p: f32, %s: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op param #0 has rank 0, but its indexing map affine_map<(d0, d1) -> (d1)> gives 1 indices}}
  flexsn.scan ins(%x : memref<?x?xf32>) params(%p : f32) outs(%s : memref<?x?xf32>)
      indexing_maps = [affine_map<(t, n) -> (t, n)>, affine_map<(t, n) -> (n)>,
                       affine_map<(t, n) -> (t, n)>] {
  ^bb0(%a: f32, %b: f32):
    flexsn.yield %a : f32
  }
  return
}

// -----

// Params do not change over time.
func.func @f(%x: memref<?x?xf32>, %p: memref<?xf32>, %s: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op param #0 must not depend on t: its map is affine_map<(d0, d1) -> (d0)>}}
  flexsn.scan ins(%x : memref<?x?xf32>) params(%p : memref<?xf32>) outs(%s : memref<?x?xf32>)
      indexing_maps = [affine_map<(t, n) -> (t, n)>, affine_map<(t, n) -> (t)>,
                       affine_map<(t, n) -> (t, n)>] {
  ^bb0(%a: f32, %b: f32):
    flexsn.yield %a : f32
  }
  return
}

// -----

// A shaped param's elements reach the body as f32.
func.func @f(%x: memref<?x?xf32>, %p: memref<?xf16>, %s: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op param #0 has type 'memref<?xf16>', so the body argument must have type 'f32', not 'f16'}}
  flexsn.scan ins(%x : memref<?x?xf32>) params(%p : memref<?xf16>) outs(%s : memref<?x?xf32>) {
  ^bb0(%a: f32, %b: f16):
    %c = arith.extf %b : f16 to f32
    flexsn.yield %c : f32
  }
  return
}

// -----

// Outputs are sequences.
func.func @f(%x: memref<?x?xf32>, %s: memref<?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op output #0 must be a sequence: its map must be the identity, got affine_map<(d0, d1) -> (d1)>}}
  flexsn.scan ins(%x : memref<?x?xf32>) outs(%s : memref<?xf32>)
      indexing_maps = [affine_map<(t, n) -> (t, n)>, affine_map<(t, n) -> (n)>] {
  ^bb0(%a: f32):
    flexsn.yield %a : f32
  }
  return
}

// -----

// Each state is a sequence or the final state, nothing in between.
func.func @f(%x: memref<?x?x?xf32>, %s: memref<?x?x?xf32>, %v: memref<?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op state #0 must be a sequence (the identity map) or the final state (every dimension but t), got affine_map<(d0, d1, d2) -> (d1)>}}
  flexsn.scan ins(%x : memref<?x?x?xf32>) outs(%s : memref<?x?x?xf32>) states(%v : memref<?xf32>)
      indexing_maps = [affine_map<(t, c, n) -> (t, c, n)>, affine_map<(t, c, n) -> (t, c, n)>,
                       affine_map<(t, c, n) -> (c)>] {
  ^bb0(%a: f32, %b: f32):
    flexsn.yield %a, %b : f32, f32
  }
  return
}

// -----

// A reduction sums over at least one dimension.
func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>, %r: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op reduction #0 keeps every dimension: that is an output, not a reduction}}
  flexsn.scan ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>) reductions(%r : memref<?x?xf32>)
      indexing_maps = [affine_map<(t, n) -> (t, n)>, affine_map<(t, n) -> (t, n)>,
                       affine_map<(t, n) -> (t, n)>] {
  ^bb0(%a: f32):
    flexsn.yield %a, %a : f32, f32
  }
  return
}

// -----

// T and N... come from an operand spanning the domain.
func.func @f(%x: memref<?xf32>, %r: memref<f32>) {
  // expected-error@+1 {{'flexsn.scan' op needs an input or output spanning the whole domain (t, n...) with the identity map: T and N... come from it}}
  flexsn.scan ins(%x : memref<?xf32>) reductions(%r : memref<f32>)
      indexing_maps = [affine_map<(t, n) -> (n)>, affine_map<(t, n) -> ()>] {
  ^bb0(%a: f32):
    flexsn.yield %a : f32
  }
  return
}

// -----

// One form: tensors or memrefs, not both.
func.func @f(%x: tensor<?x?xf32>, %s: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op mixes tensors and memrefs: its operands are all tensors (the value form) or all memrefs (the buffer form)}}
  flexsn.scan ins(%x : tensor<?x?xf32>) outs(%s : memref<?x?xf32>) {
  ^bb0(%a: f32):
    flexsn.yield %a : f32
  }
  return
}

// -----

// In the value form, each destination has a result of its type (generic
// form: the custom form infers them).
func.func @f(%x: tensor<?x?xf32>, %s: tensor<?x?xf32>) {
  // expected-error@+2 {{'flexsn.scan' op failed to infer returned types}}
  // expected-error@+1 {{'flexsn.scan' op inferred type(s) 'tensor<?x?xf32>' are incompatible with return type(s) of operation 'tensor<?x?xf16>'}}
  %y = "flexsn.scan"(%x, %s) <{indexing_maps = [affine_map<(t, n) -> (t, n)>, affine_map<(t, n) -> (t, n)>],
                               operandSegmentSizes = array<i32: 1, 0, 0, 1, 0, 0>}> ({
  ^bb0(%a: f32):
    "flexsn.yield"(%a) : (f32) -> ()
  }) : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf16>
  return
}

// -----

// The buffer form has no results.
func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>) {
  // expected-error@+2 {{'flexsn.scan' op failed to infer returned types}}
  // expected-error@+1 {{'flexsn.scan' op inferred type(s)  are incompatible with return type(s) of operation 'tensor<?x?xf32>'}}
  %y = "flexsn.scan"(%x, %s) <{indexing_maps = [affine_map<(t, n) -> (t, n)>, affine_map<(t, n) -> (t, n)>],
                               operandSegmentSizes = array<i32: 1, 0, 0, 1, 0, 0>}> ({
  ^bb0(%a: f32):
    "flexsn.yield"(%a) : (f32) -> ()
  }) : (memref<?x?xf32>, memref<?x?xf32>) -> tensor<?x?xf32>
  return
}

// -----

// Maps are an array of affine maps (generic form).
func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op attribute 'indexing_maps' failed to satisfy constraint: AffineMap array attribute}}
  "flexsn.scan"(%x, %s) <{indexing_maps = [1 : i32, 2 : i32],
                          operandSegmentSizes = array<i32: 1, 0, 0, 1, 0, 0>}> ({
  ^bb0(%a: f32):
    "flexsn.yield"(%a) : (f32) -> ()
  }) : (memref<?x?xf32>, memref<?x?xf32>) -> ()
  return
}

