// RUN: flexsn-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// flexsn.neuron: counts and names
//===----------------------------------------------------------------------===//

// A neuron needs an input: T comes from the input sequences.
// expected-error@+1 {{'flexsn.neuron' op needs at least one input}}
flexsn.neuron @no_inputs inputs() outputs(s) {
  %c = arith.constant 1.0 : f32
  flexsn.yield %c : f32
}

// -----

// A neuron with neither outputs nor states computes nothing.
// expected-error@+1 {{'flexsn.neuron' op needs at least one output or state}}
flexsn.neuron @no_results inputs(%x: f32) outputs() {
  flexsn.yield
}

// -----

// Input names are C identifiers (only the generic form can spell "1x").
// expected-error@+1 {{'flexsn.neuron' op input name '1x' is not a C identifier}}
"flexsn.neuron"() <{input_names = ["1x"], output_names = ["s"], params = [],
                    state_names = [], sym_name = "n"}> ({
^bb0(%x: f32):
  "flexsn.yield"(%x) : (f32) -> ()
}) : () -> ()

// -----

// An SSA name that is valid MLIR but not a C identifier is rejected while
// parsing, at the argument.
// expected-error@+1 {{custom op 'flexsn.neuron' input name 'x.y' is not a C identifier}}
flexsn.neuron @dotted_input inputs(%x.y: f32) outputs(s) {
  flexsn.yield %x.y : f32
}

// -----

// State names are C identifiers (checked while parsing too).
// expected-error@+1 {{custom op 'flexsn.neuron' state name '0' is not a C identifier}}
flexsn.neuron @numeric_state inputs(%x: f32) states(%0: f32) outputs(s) {
  flexsn.yield %x, %0 : f32, f32
}

// -----

// Output names are C identifiers.
// expected-error@+1 {{'flexsn.neuron' op output name 'spike-out' is not a C identifier}}
flexsn.neuron @bad_output inputs(%x: f32) outputs("spike-out") {
  flexsn.yield %x : f32
}

// -----

// An empty output name is not a C identifier either.
// expected-error@+1 {{'flexsn.neuron' op output name '' is not a C identifier}}
flexsn.neuron @empty_output inputs(%x: f32) outputs("") {
  flexsn.yield %x : f32
}

// -----

// Names must not be C, C++ or Python keywords either: an input...
// expected-error@+1 {{custom op 'flexsn.neuron' input name 'if' is a C, C++ or Python keyword}}
flexsn.neuron @keyword_input inputs(%if: f32) outputs(s) {
  flexsn.yield %if : f32
}

// -----

// ...a state...
// expected-error@+1 {{custom op 'flexsn.neuron' state name 'lambda' is a C, C++ or Python keyword}}
flexsn.neuron @keyword_state inputs(%x: f32) states(%lambda: f32) outputs(s) {
  flexsn.yield %x, %lambda : f32, f32
}

// -----

// ...an output (checked by the verifier)...
// expected-error@+1 {{'flexsn.neuron' op output name 'return' is a C, C++ or Python keyword}}
flexsn.neuron @keyword_output inputs(%x: f32) outputs(return) {
  flexsn.yield %x : f32
}

// -----

// ...or a parameter.
// expected-error@+1 {{custom op 'flexsn.neuron' parameter name 'None' is a C, C++ or Python keyword}}
flexsn.neuron @keyword_param inputs(%x: f32) outputs(s) params(%None: f32 = 1.0) {
  flexsn.yield %x : f32
}

// -----

// The generic form gets the keyword check from the verifier.
// expected-error@+1 {{'flexsn.neuron' op input name 'class' is a C, C++ or Python keyword}}
"flexsn.neuron"() <{input_names = ["class"], output_names = ["s"], params = [],
                    state_names = [], sym_name = "n"}> ({
^bb0(%x: f32):
  "flexsn.yield"(%x) : (f32) -> ()
}) : () -> ()

// -----

// A neuron's symbol name prefixes its host stubs, so it is a C identifier
// (a keyword such as @if is fine: see ops.mlir).
// expected-error@+1 {{'flexsn.neuron' op name 'my neuron' is not a C identifier}}
flexsn.neuron @"my neuron" inputs(%x: f32) outputs(s) {
  flexsn.yield %x : f32
}

// -----

// A symbol name that starts with a digit is not a C identifier either.
// expected-error@+1 {{'flexsn.neuron' op name '2lif' is not a C identifier}}
flexsn.neuron @"2lif" inputs(%x: f32) outputs(s) {
  flexsn.yield %x : f32
}

// -----

// Parameter names are C identifiers (checked while parsing the parameter).
// expected-error@+1 {{parameter name 'a.b' is not a C identifier}}
flexsn.neuron @bad_param_name inputs(%x: f32) outputs(s) params(%a.b: f32 = 1.0) {
  flexsn.yield %x : f32
}

// -----

// The parameter attribute checks its name in the generic form too.
"flexsn.neuron"() <{input_names = ["x"], output_names = ["s"],
    // expected-error@+1 {{parameter name '2a' is not a C identifier}}
    params = [#flexsn.param<"2a", 1.0 : f32, const>],
    state_names = [], sym_name = "n"}> ({
^bb0(%x: f32, %a: f32):
  "flexsn.yield"(%x) : (f32) -> ()
}) : () -> ()

// -----

// Two outputs cannot share a name.
// expected-error@+1 {{'flexsn.neuron' op output name 's' is already used by an output}}
flexsn.neuron @dup_output inputs(%x: f32) outputs(s, s) {
  flexsn.yield %x, %x : f32, f32
}

// -----

// Inputs and states share one namespace (the generic form can repeat a name).
// expected-error@+1 {{'flexsn.neuron' op state name 'x' is already used by an input}}
"flexsn.neuron"() <{input_names = ["x"], output_names = ["s"], params = [],
                    state_names = ["x"], sym_name = "n"}> ({
^bb0(%x: f32, %v: f32):
  "flexsn.yield"(%x, %v) : (f32, f32) -> ()
}) : () -> ()

// -----

// Two inputs cannot share a name.
// expected-error@+1 {{'flexsn.neuron' op input name 'x' is already used by an input}}
"flexsn.neuron"() <{input_names = ["x", "x"], output_names = ["s"], params = [],
                    state_names = [], sym_name = "n"}> ({
^bb0(%x: f32, %y: f32):
  "flexsn.yield"(%x) : (f32) -> ()
}) : () -> ()

// -----

// Parameters share the namespace of inputs and states.
// expected-error@+1 {{'flexsn.neuron' op parameter name 'v' is already used by a state}}
"flexsn.neuron"() <{input_names = ["x"], output_names = ["s"],
                    params = [#flexsn.param<"v", 1.0 : f32, const>],
                    state_names = ["v"], sym_name = "n"}> ({
^bb0(%x: f32, %v: f32, %p: f32):
  "flexsn.yield"(%x, %v) : (f32, f32) -> ()
}) : () -> ()

// -----

// The custom syntax reports a repeated argument name while parsing.
// expected-note@+2 {{previously referenced here}}
// expected-error@+1 {{region entry argument '%x' is already in use}}
flexsn.neuron @dup_ssa inputs(%x: f32) states(%x: f32) outputs(s) {
  flexsn.yield %x, %x : f32, f32
}

// -----

// A neuron is a top-level symbol: it cannot live inside a function.
func.func @f() {
  // expected-error@+1 {{'flexsn.neuron' op expects parent op 'builtin.module'}}
  flexsn.neuron @nested inputs(%x: f32) outputs(s) {
    flexsn.yield %x : f32
  }
  return
}

//===----------------------------------------------------------------------===//
// flexsn.neuron: parameters
//===----------------------------------------------------------------------===//

// -----

// The binding of a parameter is one of three keywords.
// expected-error@+1 {{expected 'const', 'runtime', 'trainable', 'per_neuron' or 'per_channel', got 'learnable'}}
flexsn.neuron @bad_kind inputs(%x: f32) outputs(s) params(%a: f32 = 1.0 learnable) {
  flexsn.yield %x : f32
}

// -----

// A per-neuron parameter is a kernel argument: a const one has no values.
// expected-error@+1 {{per_neuron parameter 'a' must be runtime or trainable: its values are a kernel argument}}
flexsn.neuron @const_per_neuron inputs(%x: f32) outputs(s) params(%a: f32 = 1.0 per_neuron) {
  flexsn.yield %x : f32
}

// -----

// Per-neuron values are f32 buffers.
// expected-error@+1 {{per_neuron parameter 'flag' must be f32, got 'i1'}}
flexsn.neuron @flag_per_neuron inputs(%x: f32) outputs(s) params(%flag: i1 = true runtime per_neuron) {
  flexsn.yield %x : f32
}

// -----

// The shape follows the binding.
// expected-error@+1 {{the binding comes before the shape: write 'runtime per_neuron'}}
flexsn.neuron @shape_first inputs(%x: f32) outputs(s) params(%a: f32 = 1.0 per_neuron runtime) {
  flexsn.yield %x : f32
}

// -----

// After the binding comes a shape, or nothing.
// expected-error@+1 {{expected 'per_neuron' or 'per_channel', got 'per_batch'}}
flexsn.neuron @bad_shape inputs(%x: f32) outputs(s) params(%a: f32 = 1.0 runtime per_batch) {
  flexsn.yield %x : f32
}

// -----

// `scalar` is the default, never written.
// expected-error@+1 {{expected 'per_neuron' or 'per_channel', got 'scalar'}}
flexsn.neuron @scalar_shape inputs(%x: f32) outputs(s) params(%a: f32 = 1.0 runtime scalar) {
  flexsn.yield %x : f32
}

// -----

// A per-channel parameter is a kernel argument too.
// expected-error@+1 {{per_channel parameter 'w' must be runtime or trainable: its values are a kernel argument}}
flexsn.neuron @const_per_channel inputs(%x: f32) outputs(s) params(%w: f32 = 0.0 per_channel) {
  flexsn.yield %x : f32
}

// -----

// Per-channel values are f32 buffers.
// expected-error@+1 {{per_channel parameter 'n' must be f32, got 'i32'}}
flexsn.neuron @int_per_channel inputs(%x: f32) outputs(s) params(%n: i32 = 1 runtime per_channel) {
  flexsn.yield %x : f32
}

// -----

// expected-error@+1 {{the binding comes before the shape: write 'trainable per_channel'}}
flexsn.neuron @channel_first inputs(%x: f32) outputs(s) params(%w: f32 = 0.0 per_channel trainable) {
  flexsn.yield %x : f32
}

// -----

// The generic form spells the shape in the attribute, and checks it there.
// expected-error@+1 {{per_neuron parameter 'a' must be f32, got 'i32'}}
"flexsn.neuron"() <{sym_name = "generic", input_names = ["x"], state_names = [], output_names = ["s"], params = [#flexsn.param<"a", 3 : i32, runtime, per_neuron>]}> ({
^bb0(%x: f32, %a: i32):
  flexsn.yield %x : f32
}) : () -> ()

// -----

// The generic form spells the binding as an enum keyword.
"flexsn.neuron"() <{input_names = ["x"], output_names = ["s"],
    // expected-error@+2 {{expected one of [const, runtime, trainable]}}
    // expected-error@+1 {{failed to parse FlexSN_ParamAttr parameter 'kind'}}
    params = [#flexsn.param<"a", 1.0 : f32, fixed>],
    state_names = [], sym_name = "n"}> ({
^bb0(%x: f32, %a: f32):
  "flexsn.yield"(%x) : (f32) -> ()
}) : () -> ()

// -----

// Parameters are f32, i1 or i32.
// expected-error@+1 {{parameter 'a' must have an f32, i1 or i32 default value, got 1.000000e+00 : f64}}
flexsn.neuron @f64_param inputs(%x: f32) outputs(s) params(%a: f64 = 1.0) {
  flexsn.yield %x : f32
}

// -----

// i64 is not a parameter type either.
// expected-error@+1 {{parameter 'n' must have an f32, i1 or i32 default value, got 3 : i64}}
flexsn.neuron @i64_param inputs(%x: f32) outputs(s) params(%n: i64 = 3) {
  flexsn.yield %x : f32
}

// -----

// A string is not a parameter value.
// expected-error@+1 {{parameter 'a' must have an f32, i1 or i32 default value}}
flexsn.neuron @string_param inputs(%x: f32) outputs(s) params(%a: f32 = "fast") {
  flexsn.yield %x : f32
}

// -----

// Only f32 parameters can be trainable.
// expected-error@+1 {{trainable parameter 'flag' must be f32, got 'i1'}}
flexsn.neuron @trainable_i1 inputs(%x: f32) outputs(s) params(%flag: i1 = true trainable) {
  flexsn.yield %x : f32
}

// -----

// An i32 parameter cannot be trainable.
// expected-error@+1 {{trainable parameter 'n' must be f32, got 'i32'}}
flexsn.neuron @trainable_i32 inputs(%x: f32) outputs(s) params(%n: i32 = 2 trainable) {
  flexsn.yield %x : f32
}

// -----

// An i1 parameter needs a boolean or integer default, not a float.
// expected-error@+1 {{floating point value not valid for specified type}}
flexsn.neuron @i1_float_default inputs(%x: f32) outputs(s) params(%flag: i1 = 1.0) {
  flexsn.yield %x : f32
}

// -----

// An i32 parameter needs an integer default.
// expected-error@+1 {{floating point value not valid for specified type}}
flexsn.neuron @i32_float_default inputs(%x: f32) outputs(s) params(%n: i32 = 1.5) {
  flexsn.yield %x : f32
}

// -----

// An f32 parameter needs a float literal (MLIR's grammar wants the '.').
// expected-note@+2 {{add a trailing dot to make the literal a float}}
// expected-error@+1 {{unexpected decimal integer literal for a floating point value}}
flexsn.neuron @f32_int_default inputs(%x: f32) outputs(s) params(%a: f32 = 1) {
  flexsn.yield %x : f32
}

// -----

// A boolean default does not fit an f32 parameter.
// expected-error@+1 {{default value of parameter 'a' has type 'i1', but the parameter has type 'f32'}}
flexsn.neuron @f32_bool_default inputs(%x: f32) outputs(s) params(%a: f32 = true) {
  flexsn.yield %x : f32
}

// -----

// A default that overflows f32 (to +inf) is rejected.
// expected-error@+1 {{parameter 'a' must have a finite default value}}
flexsn.neuron @f32_inf_default inputs(%x: f32) outputs(s) params(%a: f32 = 1.0e40) {
  flexsn.yield %x : f32
}

// -----

// A NaN default, spelled as its bit pattern, is rejected.
// expected-error@+1 {{parameter 'a' must have a finite default value}}
flexsn.neuron @f32_nan_default inputs(%x: f32) outputs(s) params(%a: f32 = 0x7FC00000 runtime) {
  flexsn.yield %x : f32
}

// -----

// The body argument of a parameter has the type of its default value.
// expected-error@+1 {{'flexsn.neuron' op parameter 'n' has type 'f32' but its default value has type 'i32'}}
"flexsn.neuron"() <{input_names = ["x"], output_names = ["s"],
                    params = [#flexsn.param<"n", 4 : i32, runtime>],
                    state_names = [], sym_name = "n"}> ({
^bb0(%x: f32, %n: f32):
  "flexsn.yield"(%x) : (f32) -> ()
}) : () -> ()

//===----------------------------------------------------------------------===//
// flexsn.neuron: body
//===----------------------------------------------------------------------===//

// -----

// The body takes exactly (inputs, states, params).
// expected-error@+1 {{'flexsn.neuron' op body takes 1 arguments, but the neuron declares 2 (1 inputs + 1 states + 0 params)}}
"flexsn.neuron"() <{input_names = ["x"], output_names = ["s"], params = [],
                    state_names = ["v"], sym_name = "n"}> ({
^bb0(%x: f32):
  "flexsn.yield"(%x, %x) : (f32, f32) -> ()
}) : () -> ()

// -----

// Inputs are f32 scalars: storage dtypes belong to the scan, not the neuron.
// expected-error@+1 {{'flexsn.neuron' op input #0 must be f32, got 'f16'}}
flexsn.neuron @f16_input inputs(%x: f16) outputs(s) {
  %c = arith.constant 1.0 : f32
  flexsn.yield %c : f32
}

// -----

// States are f32 scalars.
// expected-error@+1 {{'flexsn.neuron' op state #1 must be f32, got 'i32'}}
flexsn.neuron @i32_state inputs(%x: f32) states(%v: f32, %n: i32) outputs(s) {
  flexsn.yield %x, %v, %x : f32, f32, f32
}

// -----

// The body must end with flexsn.yield.
// expected-error@+1 {{'flexsn.neuron' op body must end with flexsn.yield}}
"flexsn.neuron"() <{input_names = ["x"], output_names = ["s"], params = [],
                    state_names = [], sym_name = "n"}> ({
^bb0(%x: f32):
  "llvm.unreachable"() : () -> ()
}) : () -> ()

// -----

// The yield returns outputs then new states: one value too many.
flexsn.neuron @yield_too_many inputs(%x: f32) states(%v: f32) outputs(s) {
  // expected-error@+1 {{'flexsn.yield' op yields 3 values, but the neuron declares 2 (1 outputs + 1 new states)}}
  flexsn.yield %x, %v, %x : f32, f32, f32
}

// -----

// The yield returns outputs then new states: the new state is missing.
flexsn.neuron @yield_too_few inputs(%x: f32) states(%v: f32) outputs(s) {
  // expected-error@+1 {{'flexsn.yield' op yields 1 values, but the neuron declares 2 (1 outputs + 1 new states)}}
  flexsn.yield %x : f32
}

// -----

// Yielded values are f32.
flexsn.neuron @yield_i1 inputs(%x: f32) outputs(s) {
  %zero = arith.constant 0.0 : f32
  %b = arith.cmpf oge, %x, %zero : f32
  // expected-error@+1 {{'flexsn.yield' op yielded value #0 must be f32, got 'i1'}}
  flexsn.yield %b : i1
}

// -----

// Body ops work on scalars, not vectors.
flexsn.neuron @vector_op inputs(%x: f32) outputs(s) {
  // expected-error@+1 {{'arith.constant' op uses non-scalar type 'vector<4xf32>': a neuron body works on scalars only}}
  %v = arith.constant dense<1.0> : vector<4xf32>
  flexsn.yield %x : f32
}

// -----

// Body ops work on scalars, not tensors.
flexsn.neuron @tensor_op inputs(%x: f32) outputs(s) {
  // expected-error@+1 {{'arith.constant' op uses non-scalar type 'tensor<2xf32>': a neuron body works on scalars only}}
  %t = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  flexsn.yield %x : f32
}

// -----

// A body computes in f32: no f64 arithmetic.
flexsn.neuron @f64_arith inputs(%x: f32) outputs(s) {
  // expected-error@+1 {{'arith.extf' op computes in 'f64', but a neuron body computes in f32}}
  %d = arith.extf %x : f32 to f64
  %e = arith.addf %d, %d : f64
  %y = arith.truncf %e : f64 to f32
  flexsn.yield %y : f32
}

// -----

// A body computes in f32: no f16 arithmetic either.
flexsn.neuron @f16_arith inputs(%x: f32) outputs(s) {
  // expected-error@+1 {{'arith.truncf' op computes in 'f16', but a neuron body computes in f32}}
  %h = arith.truncf %x : f32 to f16
  %e = math.exp %h : f16
  flexsn.yield %x : f32
}

// -----

// No calls but applications of neurons.
func.func private @helper(f32) -> f32

flexsn.neuron @calls inputs(%x: f32) outputs(s) {
  // expected-error@+1 {{'func.call' op is not allowed in a neuron body: its ops must be free of memory effects and regions (arith, math and flexsn ops are), or apply a neuron}}
  %y = func.call @helper(%x) : (f32) -> f32
  flexsn.yield %y : f32
}

// -----

// No ops holding regions.
flexsn.neuron @branches inputs(%x: f32) outputs(s) params(%f: i1 = true) {
  // expected-error@+1 {{'scf.if' op is not allowed in a neuron body: its ops must be free of memory effects and regions}}
  %y = scf.if %f -> (f32) {
    scf.yield %x : f32
  } else {
    scf.yield %x : f32
  }
  flexsn.yield %y : f32
}

// -----

// No memory.
flexsn.neuron @allocates inputs(%x: f32) outputs(s) {
  // expected-error@+1 {{'memref.alloc' op is not allowed in a neuron body}}
  %m = memref.alloc() : memref<f32>
  %y = memref.load %m[] : memref<f32>
  flexsn.yield %y : f32
}

//===----------------------------------------------------------------------===//
// flexsn.apply
//===----------------------------------------------------------------------===//

// -----

// The callee must exist.
flexsn.neuron @caller inputs(%x: f32) outputs(s) {
  // expected-error@+1 {{'flexsn.apply' op '@missing' does not reference a flexsn.neuron}}
  %y = flexsn.apply @missing(%x) : (f32) -> f32
  flexsn.yield %y : f32
}

// -----

// The callee must be a neuron, not a function.
func.func private @not_a_neuron(f32) -> f32

flexsn.neuron @caller inputs(%x: f32) outputs(s) {
  // expected-error@+1 {{'flexsn.apply' op '@not_a_neuron' does not reference a flexsn.neuron}}
  %y = flexsn.apply @not_a_neuron(%x) : (f32) -> f32
  flexsn.yield %y : f32
}

// -----

// flexsn.apply belongs in a neuron body, not in a function.
flexsn.neuron @id inputs(%x: f32) outputs(s) {
  flexsn.yield %x : f32
}

func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{'flexsn.apply' op must be inside a flexsn.neuron body or a flexsn.scan's inline body}}
  %y = flexsn.apply @id(%x) : (f32) -> f32
  return %y : f32
}

// -----

// Operands are the callee's (inputs, states, params).
flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(s) params(%tau: f32 = 2.0) {
  flexsn.yield %x, %v : f32, f32
}

flexsn.neuron @caller inputs(%x: f32) states(%v: f32) outputs(s) {
  // expected-error@+1 {{'flexsn.apply' op passes 2 operands, but @lif takes 3 (1 inputs + 1 states + 1 params)}}
  %s, %v1 = flexsn.apply @lif(%x, %v) : (f32, f32) -> (f32, f32)
  flexsn.yield %s, %v1 : f32, f32
}

// -----

// Operand types match the callee's arguments.
flexsn.neuron @gated inputs(%x: f32) outputs(s) params(%on: i1 = true) {
  flexsn.yield %x : f32
}

flexsn.neuron @caller inputs(%x: f32) outputs(s) {
  // expected-error@+1 {{'flexsn.apply' op operand #1 has type 'f32', but @gated expects 'i1'}}
  %s = flexsn.apply @gated(%x, %x) : (f32, f32) -> f32
  flexsn.yield %s : f32
}

// -----

// Results are the callee's (outputs, new states).
flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(s) {
  flexsn.yield %x, %v : f32, f32
}

flexsn.neuron @caller inputs(%x: f32) states(%v: f32) outputs(s) {
  // expected-error@+1 {{'flexsn.apply' op returns 1 values, but @lif produces 2 (1 outputs + 1 new states)}}
  %s = flexsn.apply @lif(%x, %v) : (f32, f32) -> f32
  flexsn.yield %s, %v : f32, f32
}

// -----

// A neuron cannot apply itself.
flexsn.neuron @self inputs(%x: f32) outputs(s) {
  // The path is exactly "@self -> @self" (the regex anchors its end).
  // expected-error-re@+1 {{'flexsn.apply' op makes neuron @self recursive: @self -> @self{{$}}}}
  %y = flexsn.apply @self(%x) : (f32) -> f32
  flexsn.yield %y : f32
}

// -----

// Two neurons cannot apply each other (the first use verified reports it).
flexsn.neuron @a inputs(%x: f32) outputs(s) {
  %y = flexsn.apply @b(%x) : (f32) -> f32
  flexsn.yield %y : f32
}

flexsn.neuron @b inputs(%x: f32) outputs(s) {
  // expected-error@+1 {{'flexsn.apply' op makes neuron @b recursive: @b -> @a -> @b}}
  %y = flexsn.apply @a(%x) : (f32) -> f32
  flexsn.yield %y : f32
}

// -----

// A longer cycle is found too, and reported with its path.
flexsn.neuron @a inputs(%x: f32) outputs(s) {
  %y = flexsn.apply @b(%x) : (f32) -> f32
  flexsn.yield %y : f32
}

flexsn.neuron @b inputs(%x: f32) outputs(s) {
  %y = flexsn.apply @c(%x) : (f32) -> f32
  flexsn.yield %y : f32
}

flexsn.neuron @c inputs(%x: f32) outputs(s) {
  // expected-error@+1 {{'flexsn.apply' op makes neuron @c recursive: @c -> @a -> @b -> @c}}
  %y = flexsn.apply @a(%x) : (f32) -> f32
  flexsn.yield %y : f32
}

//===----------------------------------------------------------------------===//
// flexsn.spike and friends
//===----------------------------------------------------------------------===//

// -----

// A spike computes on f32.
func.func @f(%x: f16) -> f16 {
  // expected-error@+1 {{'flexsn.spike' op operand #0 must be f32 or a vector of f32, but got 'f16'}}
  %0 = flexsn.spike %x surrogate(#flexsn.sigmoid) : f16
  return %0 : f16
}

// -----

// The surrogate must be a surrogate attribute.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{invalid kind of attribute specified}}
  %0 = flexsn.surrogate_grad %x surrogate(1.0 : f32) : f32
  return %0 : f32
}

// -----

// A parameter attribute is not a surrogate.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{invalid properties {surrogate = #flexsn.param<"a", 1.000000e+00 : f32, const>} for op flexsn.spike: Invalid attribute `surrogate` in property conversion}}
  %0 = "flexsn.spike"(%x) <{surrogate = #flexsn.param<"a", 1.0 : f32, const>}> : (f32) -> f32
  return %0 : f32
}

// -----

// flexsn.yield only terminates neuron and scan bodies.
func.func @f(%x: f32) {
  // expected-error@+1 {{'flexsn.yield' op expects parent op to be one of 'flexsn.neuron, flexsn.scan'}}
  flexsn.yield %x : f32
}

//===----------------------------------------------------------------------===//
// Surrogate attributes
//===----------------------------------------------------------------------===//

// -----

// An unknown surrogate parameter name is rejected.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{duplicate or unknown struct parameter name: beta}}
  %0 = flexsn.spike %x surrogate(#flexsn.sigmoid<beta = 1.0>) : f32
  return %0 : f32
}

// -----

// A parameter may be given once.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{duplicate or unknown struct parameter name: alpha}}
  %0 = flexsn.spike %x surrogate(#flexsn.atan<alpha = 1.0, alpha = 2.0>) : f32
  return %0 : f32
}

// -----

// A surrogate without parameters rejects a parameter list...
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 'straight_through' takes no parameters}}
  %0 = flexsn.spike %x surrogate(#flexsn.straight_through<alpha = 1.0>) : f32
  return %0 : f32
}

// -----

// ...garbage in angle brackets...
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 'straight_through' takes no parameters}}
  %0 = flexsn.spike %x surrogate(#flexsn.straight_through<garbage !! 12>) : f32
  return %0 : f32
}

// -----

// ...and even an empty `<>`.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 'straight_through' takes no parameters}}
  %0 = flexsn.surrogate_grad %x surrogate(#flexsn.straight_through<>) : f32
  return %0 : f32
}

// -----

// An unknown surrogate mnemonic is rejected.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{unknown attribute `tanh` in dialect `flexsn`; the surrogates are sigmoid, atan, piecewise_quadratic, piecewise_exp, soft_sign, super_spike, erf, nonzero_sign_log_abs, piecewise_leaky_relu, squarewave_fourier_series, s2nn, q_pseudo_spike, leaky_k_relu, fake_numerical_gradient, log_tailed_relu, rect, multi_gaussian, straight_through}}
  %0 = flexsn.spike %x surrogate(#flexsn.tanh) : f32
  return %0 : f32
}

// -----

// The number of Fourier terms is an integer.
func.func @f(%x: f32) -> f32 {
  // expected-error@+2 {{expected integer value}}
  // expected-error@+1 {{failed to parse FlexSN_SquarewaveFourierSeriesAttr parameter 'n'}}
  %0 = flexsn.spike %x surrogate(#flexsn.squarewave_fourier_series<n = 2.5>) : f32
  return %0 : f32
}

// -----

// sigmoid needs alpha > 0.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 'sigmoid' needs alpha > 0, got 0.0}}
  %0 = flexsn.spike %x surrogate(#flexsn.sigmoid<alpha = 0>) : f32
  return %0 : f32
}

// -----

// atan needs alpha > 0.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 'atan' needs alpha > 0, got -2.0}}
  %0 = flexsn.spike %x surrogate(#flexsn.atan<alpha = -2>) : f32
  return %0 : f32
}

// -----

// piecewise_quadratic needs alpha > 0.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 'piecewise_quadratic' needs alpha > 0, got -0.5}}
  %0 = flexsn.spike %x surrogate(#flexsn.piecewise_quadratic<alpha = -0.5>) : f32
  return %0 : f32
}

// -----

// piecewise_exp needs alpha > 0.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 'piecewise_exp' needs alpha > 0, got 0.0}}
  %0 = flexsn.spike %x surrogate(#flexsn.piecewise_exp<alpha = 0.0>) : f32
  return %0 : f32
}

// -----

// soft_sign needs alpha > 0.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 'soft_sign' needs alpha > 0, got -1.0}}
  %0 = flexsn.spike %x surrogate(#flexsn.soft_sign<alpha = -1>) : f32
  return %0 : f32
}

// -----

// super_spike needs alpha > 0.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 'super_spike' needs alpha > 0, got 0.0}}
  %0 = flexsn.spike %x surrogate(#flexsn.super_spike<alpha = 0>) : f32
  return %0 : f32
}

// -----

// erf needs alpha > 0.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 'erf' needs alpha > 0, got -3.0}}
  %0 = flexsn.spike %x surrogate(#flexsn.erf<alpha = -3.0>) : f32
  return %0 : f32
}

// -----

// nonzero_sign_log_abs needs alpha > 0.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 'nonzero_sign_log_abs' needs alpha > 0, got 0.0}}
  %0 = flexsn.spike %x surrogate(#flexsn.nonzero_sign_log_abs<alpha = 0>) : f32
  return %0 : f32
}

// -----

// -0.0 is not > 0.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 'fake_numerical_gradient' needs alpha > 0, got -0.0}}
  %0 = flexsn.spike %x surrogate(#flexsn.fake_numerical_gradient<alpha = -0.0>) : f32
  return %0 : f32
}

// -----

// rect needs alpha > 0 (its window is |x| < 0.5/alpha).
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 'rect' needs alpha > 0, got 0.0}}
  %0 = flexsn.spike %x surrogate(#flexsn.rect<alpha = 0>) : f32
  return %0 : f32
}

// -----

// q_pseudo_spike needs alpha > 1 (it divides by alpha - 1).
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 'q_pseudo_spike' needs alpha > 1, got 1.0}}
  %0 = flexsn.spike %x surrogate(#flexsn.q_pseudo_spike<alpha = 1>) : f32
  return %0 : f32
}

// -----

// q_pseudo_spike needs alpha > 1: a value in (0, 1] is not enough.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 'q_pseudo_spike' needs alpha > 1, got 0.5}}
  %0 = flexsn.surrogate_grad %x surrogate(#flexsn.q_pseudo_spike<alpha = 0.5>) : f32
  return %0 : f32
}

// -----

// multi_gaussian's widths are positive and its weight finite.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 'multi_gaussian' needs sigma > 0, got 0.0}}
  %0 = flexsn.spike %x surrogate(#flexsn.multi_gaussian<sigma = 0>) : f32
  return %0 : f32
}

// -----

func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 'multi_gaussian' needs s > 0, got -6.0}}
  %0 = flexsn.spike %x surrogate(#flexsn.multi_gaussian<s = -6>) : f32
  return %0 : f32
}

// -----

func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 'multi_gaussian' needs h to be a finite value, got inf}}
  %0 = flexsn.spike %x surrogate(#flexsn.multi_gaussian<h = 1.0e400>) : f32
  return %0 : f32
}

// -----

// piecewise_leaky_relu needs w > 0.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 'piecewise_leaky_relu' needs w > 0, got 0.0}}
  %0 = flexsn.spike %x surrogate(#flexsn.piecewise_leaky_relu<w = 0, c = 0.1>) : f32
  return %0 : f32
}

// -----

// piecewise_leaky_relu needs w > 0, even with a negative slope c.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 'piecewise_leaky_relu' needs w > 0, got -1.0}}
  %0 = flexsn.spike %x surrogate(#flexsn.piecewise_leaky_relu<w = -1.0>) : f32
  return %0 : f32
}

// -----

// piecewise_leaky_relu needs a finite c (1.0e400 overflows to +inf).
func.func @f(%x: f32) -> f32 {
  // expected-error-re@+1 {{surrogate 'piecewise_leaky_relu' needs c to be a finite value, got inf{{$}}}}
  %0 = flexsn.spike %x surrogate(#flexsn.piecewise_leaky_relu<c = 1.0e400>) : f32
  return %0 : f32
}

// -----

// leaky_k_relu needs finite slopes.
func.func @f(%x: f32) -> f32 {
  // expected-error-re@+1 {{surrogate 'leaky_k_relu' needs k to be a finite value, got -inf{{$}}}}
  %0 = flexsn.spike %x surrogate(#flexsn.leaky_k_relu<k = -1.0e400>) : f32
  return %0 : f32
}

// -----

// log_tailed_relu needs a finite alpha.
func.func @f(%x: f32) -> f32 {
  // expected-error-re@+1 {{surrogate 'log_tailed_relu' needs alpha to be a finite value, got inf{{$}}}}
  %0 = flexsn.spike %x surrogate(#flexsn.log_tailed_relu<alpha = 1.0e999>) : f32
  return %0 : f32
}

// -----

// squarewave_fourier_series needs n >= 1.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 'squarewave_fourier_series' needs 1 <= n <= 64, got 0}}
  %0 = flexsn.spike %x surrogate(#flexsn.squarewave_fourier_series<n = 0>) : f32
  return %0 : f32
}

// -----

// squarewave_fourier_series needs n <= 64.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 'squarewave_fourier_series' needs 1 <= n <= 64, got 65}}
  %0 = flexsn.spike %x surrogate(#flexsn.squarewave_fourier_series<n = 65>) : f32
  return %0 : f32
}

// -----

// squarewave_fourier_series rejects a negative n.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 'squarewave_fourier_series' needs 1 <= n <= 64, got -3}}
  %0 = flexsn.spike %x surrogate(#flexsn.squarewave_fourier_series<n = -3>) : f32
  return %0 : f32
}

// -----

// squarewave_fourier_series needs T_period > 0.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 'squarewave_fourier_series' needs T_period > 0, got 0.0}}
  %0 = flexsn.spike %x surrogate(#flexsn.squarewave_fourier_series<T_period = 0>) : f32
  return %0 : f32
}

// -----

// squarewave_fourier_series needs T_period > 0: negative periods are rejected.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 'squarewave_fourier_series' needs T_period > 0, got -8.0}}
  %0 = flexsn.spike %x surrogate(#flexsn.squarewave_fourier_series<n = 3, T_period = -8.0>) : f32
  return %0 : f32
}

// -----

// s2nn needs alpha > 0.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 's2nn' needs alpha > 0, got 0.0}}
  %0 = flexsn.spike %x surrogate(#flexsn.s2nn<alpha = 0>) : f32
  return %0 : f32
}

// -----

// s2nn needs beta > 0.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 's2nn' needs beta > 0, got 0.0}}
  %0 = flexsn.spike %x surrogate(#flexsn.s2nn<beta = 0>) : f32
  return %0 : f32
}

// -----

// s2nn needs beta > 0: negative values are rejected.
func.func @f(%x: f32) -> f32 {
  // expected-error@+1 {{surrogate 's2nn' needs beta > 0, got -1.0}}
  %0 = flexsn.spike %x surrogate(#flexsn.s2nn<alpha = 2.0, beta = -1.0>) : f32
  return %0 : f32
}

// -----

// A neuron body reports a bad surrogate at the attribute.
flexsn.neuron @bad_surrogate inputs(%x: f32) outputs(s) {
  // expected-error@+1 {{surrogate 'sigmoid' needs alpha > 0, got -4.0}}
  %s = flexsn.spike %x surrogate(#flexsn.sigmoid<alpha = -4.0>) : f32
  flexsn.yield %s : f32
}

//===----------------------------------------------------------------------===//
// flexsn.scan: structure
//===----------------------------------------------------------------------===//

// -----

// A scan runs a neuron or an inline body, not both.
flexsn.neuron @id inputs(%x: f32) outputs(s) {
  flexsn.yield %x : f32
}

func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op needs either a neuron @callee or an inline body, not both or neither}}
  flexsn.scan @id ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>) {
  ^bb0(%a: f32):
    flexsn.yield %a : f32
  }
  return
}

// -----

// A scan with neither a callee nor a body has nothing to run.
func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op needs either a neuron @callee or an inline body, not both or neither}}
  flexsn.scan ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>)
  return
}

// -----

// Reductions come from an inline body's extra yielded values.
flexsn.neuron @id inputs(%x: f32) outputs(s) {
  flexsn.yield %x : f32
}

func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>, %r: memref<f32>) {
  // expected-error@+1 {{'flexsn.scan' op reductions need an inline body: a neuron yields none}}
  flexsn.scan @id ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>) reductions(%r : memref<f32>)
  return
}

// -----

// A scan needs an input (generic form).
func.func @f(%s: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op needs at least one input}}
  "flexsn.scan"(%s) <{indexing_maps = [affine_map<(t, n) -> (t, n)>],
                      operandSegmentSizes = array<i32: 0, 0, 0, 1, 0, 0>}> ({
  ^bb0:
    %c = arith.constant 1.0 : f32
    "flexsn.yield"(%c) : (f32) -> ()
  }) : (memref<?x?xf32>) -> ()
  return
}

// -----

// When both are given, there is one initial state per state result.
func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>, %v0: memref<?xf32>, %v: memref<?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op has 2 initial states but 1 state results}}
  flexsn.scan ins(%x : memref<?x?xf32>) inits(%v0, %v0 : memref<?xf32>, memref<?xf32>)
      outs(%s : memref<?x?xf32>) states(%v : memref<?xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    flexsn.yield %a, %b, %c : f32, f32, f32
  }
  return
}

// -----

// The domain is (t, n...), with 1 to 4 neuron dimensions.
func.func @f(%x: memref<?xf32>, %s: memref<?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op has a domain of rank 1: the domain is (t, n...) with 1 to 4 neuron dimensions}}
  flexsn.scan ins(%x : memref<?xf32>) outs(%s : memref<?xf32>) {
  ^bb0(%a: f32):
    flexsn.yield %a : f32
  }
  return
}

// -----

// Input sequences are stored as f32, f16 or bf16, not f64...
func.func @f(%x: memref<?x?xf64>, %s: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op operand #0 must be variadic of 0D/1D/2D/3D/4D/5D tensor of 32-bit float or 16-bit float or bfloat16 type values or 0D/1D/2D/3D/4D/5D memref of 32-bit float or 16-bit float or bfloat16 type values, but got 'memref<?x?xf64>'}}
  flexsn.scan ins(%x : memref<?x?xf64>) outs(%s : memref<?x?xf32>) {
  ^bb0(%a: f32):
    flexsn.yield %a : f32
  }
  return
}

// -----

// ...and not i8 either: only outputs (0/1 spikes) may be bytes.
func.func @f(%x: memref<?x?xi8>, %s: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op operand #0 must be variadic of 0D/1D/2D/3D/4D/5D tensor of 32-bit float or 16-bit float or bfloat16 type values or 0D/1D/2D/3D/4D/5D memref of 32-bit float or 16-bit float or bfloat16 type values, but got 'memref<?x?xi8>'}}
  flexsn.scan ins(%x : memref<?x?xi8>) outs(%s : memref<?x?xf32>) {
  ^bb0(%a: f32):
    flexsn.yield %a : f32
  }
  return
}

// -----

// Output sequences are stored as f32, f16, bf16 or i8, not f64.
func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf64>) {
  // expected-error@+1 {{'flexsn.scan' op operand #1 must be variadic of 0D/1D/2D/3D/4D/5D tensor of 32-bit float or 16-bit float or bfloat16 type or 8-bit signless integer or 1-bit signless integer values or 0D/1D/2D/3D/4D/5D memref of 32-bit float or 16-bit float or bfloat16 type or 8-bit signless integer or 1-bit signless integer values, but got 'memref<?x?xf64>'}}
  flexsn.scan ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf64>) {
  ^bb0(%a: f32):
    flexsn.yield %a : f32
  }
  return
}

// -----

// States are stored as f32, f16 or bf16, not i8.
func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>, %v: memref<?xi8>) {
  // expected-error@+1 {{'flexsn.scan' op operand #2 must be variadic of 0D/1D/2D/3D/4D/5D tensor of 32-bit float or 16-bit float or bfloat16 type values or 0D/1D/2D/3D/4D/5D memref of 32-bit float or 16-bit float or bfloat16 type values, but got 'memref<?xi8>'}}
  flexsn.scan ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>) states(%v : memref<?xi8>) {
  ^bb0(%a: f32, %b: f32):
    flexsn.yield %a, %b : f32, f32
  }
  return
}

// -----

// Reductions sum in f32.
func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>, %r: memref<f16>) {
  // expected-error@+1 {{'flexsn.scan' op operand #2 must be variadic of 0D/1D/2D/3D/4D/5D tensor of 32-bit float values or 0D/1D/2D/3D/4D/5D memref of 32-bit float values, but got 'memref<f16>'}}
  flexsn.scan ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>) reductions(%r : memref<f16>) {
  ^bb0(%a: f32):
    flexsn.yield %a, %a : f32, f32
  }
  return
}

// -----

// Scan params are f32, i1 or i32 scalars.
func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>, %p: f64) {
  // expected-error@+1 {{'flexsn.scan' op operand #1 must be variadic of 32-bit float or 1-bit signless integer or 32-bit signless integer or 0D/1D/2D/3D/4D/5D tensor of 32-bit float or 16-bit float or bfloat16 type values or 0D/1D/2D/3D/4D/5D memref of 32-bit float or 16-bit float or bfloat16 type values, but got 'f64'}}
  flexsn.scan ins(%x : memref<?x?xf32>) params(%p : f64) outs(%s : memref<?x?xf32>) {
  ^bb0(%a: f32, %b: f64):
    flexsn.yield %a : f32
  }
  return
}

//===----------------------------------------------------------------------===//
// flexsn.scan: shapes
//===----------------------------------------------------------------------===//

// -----

// Without indexing maps, every sequence has the rank of the first input.
flexsn.neuron @id inputs(%x: f32) outputs(s) {
  flexsn.yield %x : f32
}

func.func @f(%x: memref<?x?xf32>, %s: memref<?x?x?xf32>) {
  // expected-error@+1 {{output #0 has rank 3, which implies no indexing map in a domain of rank 2 (the first input's): expected rank 2, or give 'indexing_maps'}}
  flexsn.scan @id ins(%x : memref<?x?xf32>) outs(%s : memref<?x?x?xf32>)
  return
}

// -----

// Every input sequence has the rank of the first one.
flexsn.neuron @add inputs(%x: f32, %y: f32) outputs(s) {
  %s = arith.addf %x, %y : f32
  flexsn.yield %s : f32
}

func.func @f(%x: memref<?x?x?xf32>, %y: memref<?x?xf32>, %s: memref<?x?x?xf32>) {
  // expected-error@+1 {{input #1 has rank 2, which implies no indexing map in a domain of rank 3 (the first input's): expected rank 3, or give 'indexing_maps'}}
  flexsn.scan @add ins(%x, %y : memref<?x?x?xf32>, memref<?x?xf32>) outs(%s : memref<?x?x?xf32>)
  return
}

// -----

// Static dims of sequences agree ([T, N] = [8, 16] vs N = 32).
flexsn.neuron @id inputs(%x: f32) outputs(s) {
  flexsn.yield %x : f32
}

func.func @f(%x: memref<8x16xf32>, %s: memref<?x32xf32>) {
  // expected-error@+1 {{'flexsn.scan' op output #0 has size 32 in dimension 1, but input #0 gives domain dimension d1 size 16}}
  flexsn.scan @id ins(%x : memref<8x16xf32>) outs(%s : memref<?x32xf32>)
  return
}

// -----

// A static dim known only from the output still constrains a later sequence.
flexsn.neuron @id inputs(%x: f32) states(%v: f32) outputs(s) {
  flexsn.yield %x, %v : f32, f32
}

func.func @f(%x: memref<?x?xf32>, %s: memref<4x?xf32>, %v: memref<5x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op state #0 has size 5 in dimension 0, but output #0 gives domain dimension d0 size 4}}
  flexsn.scan @id ins(%x : memref<?x?xf32>) outs(%s : memref<4x?xf32>) states(%v : memref<5x?xf32>)
  return
}

// -----

// Initial states are [N...]: one rank less than the sequences.
flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(s) {
  flexsn.yield %x, %v : f32, f32
}

func.func @f(%x: memref<?x?xf32>, %v0: memref<?x?xf32>, %s: memref<?x?xf32>) {
  // expected-error@+1 {{initial state #0 has rank 2, which implies no indexing map in a domain of rank 2 (the first input's): expected rank 1, or give 'indexing_maps'}}
  flexsn.scan @lif ins(%x : memref<?x?xf32>) inits(%v0 : memref<?x?xf32>) outs(%s : memref<?x?xf32>)
  return
}

// -----

// Initial states match the sequences' N dims.
flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(s) {
  flexsn.yield %x, %v : f32, f32
}

func.func @f(%x: memref<?x4x8xf32>, %v0: memref<4x7xf32>, %s: memref<?x?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op initial state #0 has size 7 in dimension 1, but input #0 gives domain dimension d2 size 8}}
  flexsn.scan @lif ins(%x : memref<?x4x8xf32>) inits(%v0 : memref<4x7xf32>) outs(%s : memref<?x?x?xf32>)
  return
}

// -----

// Without indexing maps, a state's rank chooses a sequence [T, N...] or
// the final state [N...]: nothing else.
flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(s) {
  flexsn.yield %x, %v : f32, f32
}

func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>, %v: memref<?x?x?xf32>) {
  // expected-error@+1 {{state #0 has rank 3, which implies no indexing map in a domain of rank 2 (the first input's): expected rank 2 or 1, or give 'indexing_maps'}}
  flexsn.scan @lif ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>) states(%v : memref<?x?x?xf32>)
  return
}

// -----

// Final states match the sequences' static N dims.
flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(s) {
  flexsn.yield %x, %v : f32, f32
}

func.func @f(%x: memref<?x128xf32>, %s: memref<?x?xf32>, %v: memref<64xf32>) {
  // expected-error@+1 {{'flexsn.scan' op state #0 has size 64 in dimension 0, but input #0 gives domain dimension d1 size 128}}
  flexsn.scan @lif ins(%x : memref<?x128xf32>) outs(%s : memref<?x?xf32>) states(%v : memref<64xf32>)
  return
}

//===----------------------------------------------------------------------===//
// flexsn.scan: callee
//===----------------------------------------------------------------------===//

// -----

// The callee must exist.
func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op '@missing' does not reference a flexsn.neuron}}
  flexsn.scan @missing ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>)
  return
}

// -----

// The callee must be a neuron, not a function.
func.func private @not_a_neuron(f32) -> f32

func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op '@not_a_neuron' does not reference a flexsn.neuron}}
  flexsn.scan @not_a_neuron ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>)
  return
}

// -----

// One input sequence per neuron input.
flexsn.neuron @add inputs(%x: f32, %y: f32) outputs(s) {
  %s = arith.addf %x, %y : f32
  flexsn.yield %s : f32
}

func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op has 1 input sequences, but @add has 2}}
  flexsn.scan @add ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>)
  return
}

// -----

// One output sequence per neuron output.
flexsn.neuron @id inputs(%x: f32) outputs(s) {
  flexsn.yield %x : f32
}

func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op has 2 output sequences, but @id has 1}}
  flexsn.scan @id ins(%x : memref<?x?xf32>) outs(%s, %s : memref<?x?xf32>, memref<?x?xf32>)
  return
}

// -----

// Initial states, when given, are one per neuron state.
flexsn.neuron @two_states inputs(%x: f32) states(%u: f32, %v: f32) outputs(s) {
  flexsn.yield %x, %u, %v : f32, f32, f32
}

func.func @f(%x: memref<?x?xf32>, %v0: memref<?xf32>, %s: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op has 1 initial states, but @two_states has 2}}
  flexsn.scan @two_states ins(%x : memref<?x?xf32>) inits(%v0 : memref<?xf32>) outs(%s : memref<?x?xf32>)
  return
}

// -----

// State results, when given, are one per neuron state.
flexsn.neuron @two_states inputs(%x: f32) states(%u: f32, %v: f32) outputs(s) {
  flexsn.yield %x, %u, %v : f32, f32, f32
}

func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>, %v: memref<?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op has 3 state results, but @two_states has 2}}
  flexsn.scan @two_states ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>)
      states(%v, %v, %v : memref<?xf32>, memref<?xf32>, memref<?xf32>)
  return
}

// -----

// A stateless neuron takes no initial states.
flexsn.neuron @id inputs(%x: f32) outputs(s) {
  flexsn.yield %x : f32
}

func.func @f(%x: memref<?x?xf32>, %v0: memref<?xf32>, %s: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op has 1 initial states, but @id has 0}}
  flexsn.scan @id ins(%x : memref<?x?xf32>) inits(%v0 : memref<?xf32>) outs(%s : memref<?x?xf32>)
  return
}

// -----

// One scan param per runtime or trainable neuron parameter; const ones are specialized.
flexsn.neuron @lif inputs(%x: f32) outputs(s)
    params(%tau: f32 = 2.0 trainable, %v_th: f32 = 1.0, %hard: i1 = true runtime) {
  flexsn.yield %x : f32
}

func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>, %tau: f32, %v_th: f32, %hard: i1) {
  // expected-error@+1 {{'flexsn.scan' op has 3 runtime params, but @lif has 2}}
  flexsn.scan @lif ins(%x : memref<?x?xf32>) params(%tau, %v_th, %hard : f32, f32, i1) outs(%s : memref<?x?xf32>)
  return
}

// -----

// Runtime params must all be passed.
flexsn.neuron @lif inputs(%x: f32) outputs(s) params(%tau: f32 = 2.0 runtime) {
  flexsn.yield %x : f32
}

func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op has 0 runtime params, but @lif has 1}}
  flexsn.scan @lif ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>)
  return
}

// -----

// Scan params have the types of the neuron's runtime params.
flexsn.neuron @lif inputs(%x: f32) outputs(s)
    params(%tau: f32 = 2.0 runtime, %hard: i1 = true runtime) {
  flexsn.yield %x : f32
}

func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>, %tau: f32, %n: i32) {
  // expected-error@+1 {{'flexsn.scan' op param #1 ('hard') has type 'i32', but @lif declares a scalar 'i1'}}
  flexsn.scan @lif ins(%x : memref<?x?xf32>) params(%tau, %n : f32, i32) outs(%s : memref<?x?xf32>)
  return
}

// -----

// A per-neuron param takes an f32 buffer, not a scalar.
flexsn.neuron @lifp inputs(%x: f32) outputs(s)
    params(%th: f32 = 1.0 runtime per_neuron) {
  flexsn.yield %x : f32
}

func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>, %th: f32) {
  // expected-error@+1 {{'flexsn.scan' op param #0 ('th') has type 'f32', but @lifp declares it per_neuron: an f32 tensor or buffer}}
  flexsn.scan @lifp ins(%x : memref<?x?xf32>) params(%th : f32) outs(%s : memref<?x?xf32>)
  return
}

// -----

// A scalar param takes a scalar, not a buffer.
flexsn.neuron @lifs inputs(%x: f32) outputs(s)
    params(%th: f32 = 1.0 runtime) {
  flexsn.yield %x : f32
}

func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>, %th: memref<?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op param #0 ('th') has type 'memref<?xf32>', but @lifs declares a scalar 'f32'}}
  flexsn.scan @lifs ins(%x : memref<?x?xf32>) params(%th : memref<?xf32>) outs(%s : memref<?x?xf32>)
  return
}

// -----

// A neuron's per-neuron param has one value per neuron, not per channel.
flexsn.neuron @lifc inputs(%x: f32) outputs(s)
    params(%th: f32 = 1.0 trainable per_neuron) {
  flexsn.yield %x : f32
}

func.func @f(%x: memref<?x?x?xf32>, %s: memref<?x?x?xf32>, %th: memref<?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op param #0 ('th') is per_neuron: its map must keep every neuron dimension, got affine_map<(d0, d1, d2) -> (d1)>}}
  flexsn.scan @lifc ins(%x : memref<?x?x?xf32>) params(%th : memref<?xf32>) outs(%s : memref<?x?x?xf32>)
      indexing_maps = [affine_map<(t, c, hw) -> (t, c, hw)>, affine_map<(t, c, hw) -> (c)>,
                       affine_map<(t, c, hw) -> (t, c, hw)>]
  return
}

// -----

// A per-channel param takes an f32 buffer.
flexsn.neuron @plifc inputs(%x: f32) outputs(s)
    params(%w: f32 = 0.0 trainable per_channel) {
  flexsn.yield %x : f32
}

func.func @f(%x: memref<?x?x?xf32>, %s: memref<?x?x?xf32>, %w: f32) {
  // expected-error@+1 {{'flexsn.scan' op param #0 ('w') has type 'f32', but @plifc declares it per_channel: an f32 tensor or buffer}}
  flexsn.scan @plifc ins(%x : memref<?x?x?xf32>) params(%w : f32) outs(%s : memref<?x?x?xf32>)
  return
}

// -----

// A per-channel param keeps one neuron dimension: the channel.
flexsn.neuron @plifc inputs(%x: f32) outputs(s)
    params(%w: f32 = 0.0 trainable per_channel) {
  flexsn.yield %x : f32
}

func.func @f(%x: memref<?x?x?xf32>, %s: memref<?x?x?xf32>, %w: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op param #0 ('w') is per_channel: its map must keep one neuron dimension (the channel), got affine_map<(d0, d1, d2) -> (d1, d2)>}}
  flexsn.scan @plifc ins(%x : memref<?x?x?xf32>) params(%w : memref<?x?xf32>) outs(%s : memref<?x?x?xf32>)
  return
}

//===----------------------------------------------------------------------===//
// flexsn.scan: inline body
//===----------------------------------------------------------------------===//

// -----

// An inline body is a single block (generic form).
func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op body must have exactly one block}}
  "flexsn.scan"(%x, %s) <{indexing_maps = [affine_map<(t, n) -> (t, n)>, affine_map<(t, n) -> (t, n)>],
                          operandSegmentSizes = array<i32: 1, 0, 0, 1, 0, 0>}> ({
  ^bb0(%a: f32):
    "flexsn.yield"(%a) : (f32) -> ()
  ^bb1:
    %c = arith.constant 0.0 : f32
    "flexsn.yield"(%c) : (f32) -> ()
  }) : (memref<?x?xf32>, memref<?x?xf32>) -> ()
  return
}

// -----

// The body takes at least one argument per input and per param.
func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>, %p: f32) {
  // expected-error@+1 {{'flexsn.scan' op body takes 1 arguments, fewer than its 1 inputs + 1 params}}
  flexsn.scan ins(%x : memref<?x?xf32>) params(%p : f32) outs(%s : memref<?x?xf32>) {
  ^bb0(%a: f32):
    flexsn.yield %a : f32
  }
  return
}

// -----

// Initial states match the states the body carries.
func.func @f(%x: memref<?x?xf32>, %v0: memref<?xf32>, %s: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op has 2 initial states, but its body carries 1 states}}
  flexsn.scan ins(%x : memref<?x?xf32>) inits(%v0, %v0 : memref<?xf32>, memref<?xf32>) outs(%s : memref<?x?xf32>) {
  ^bb0(%a: f32, %v: f32):
    flexsn.yield %a, %v : f32, f32
  }
  return
}

// -----

// State results match the states the body carries.
func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>, %v: memref<?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op has 1 state results, but its body carries 0 states}}
  flexsn.scan ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>) states(%v : memref<?xf32>) {
  ^bb0(%a: f32):
    flexsn.yield %a : f32
  }
  return
}

// -----

// Body inputs and states are f32, whatever the storage dtype.
func.func @f(%x: memref<?x?xf16>, %s: memref<?x?xf16>) {
  // expected-error@+1 {{'flexsn.scan' op body argument #0 must be f32, got 'f16'}}
  flexsn.scan ins(%x : memref<?x?xf16>) outs(%s : memref<?x?xf16>) {
  ^bb0(%a: f16):
    %c = arith.constant 1.0 : f32
    flexsn.yield %c : f32
  }
  return
}

// -----

// Body param arguments have the types of the param operands.
func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>, %n: i32) {
  // expected-error@+1 {{'flexsn.scan' op param #0 has type 'i32', so the body argument must have type 'i32', not 'f32'}}
  flexsn.scan ins(%x : memref<?x?xf32>) params(%n : i32) outs(%s : memref<?x?xf32>) {
  ^bb0(%a: f32, %b: f32):
    flexsn.yield %a : f32
  }
  return
}

// -----

// An inline body ends with flexsn.yield.
func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>) {
  // expected-error@+1 {{'flexsn.scan' op body must end with flexsn.yield}}
  flexsn.scan ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>) {
  ^bb0(%a: f32):
    "llvm.unreachable"() : () -> ()
  }
  return
}

// -----

// The yield returns outputs, new states, then reductions.
func.func @f(%x: memref<?x?xf32>, %v0: memref<?xf32>, %s: memref<?x?xf32>, %r: memref<f32>) {
  flexsn.scan ins(%x : memref<?x?xf32>) inits(%v0 : memref<?xf32>) outs(%s : memref<?x?xf32>)
      reductions(%r : memref<f32>) {
  ^bb0(%a: f32, %v: f32):
    // expected-error@+1 {{'flexsn.yield' op yields 2 values, but the scan expects 3 (1 outputs + 1 new states + 1 reductions)}}
    flexsn.yield %a, %v : f32, f32
  }
  return
}

// -----

// Yielded values are f32.
func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>) {
  flexsn.scan ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>) {
  ^bb0(%a: f32):
    %n = arith.fptosi %a : f32 to i32
    // expected-error@+1 {{'flexsn.yield' op yielded value #0 must be f32, got 'i32'}}
    flexsn.yield %n : i32
  }
  return
}

// -----

// No memory access in an inline body either.
func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>, %m: memref<f32>) {
  flexsn.scan ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>) {
  ^bb0(%a: f32):
    // expected-error@+1 {{'memref.load' op is not allowed in a scan body: its ops must be free of memory effects and regions}}
    %b = memref.load %m[] : memref<f32>
    flexsn.yield %b : f32
  }
  return
}

// -----

// An inline body is scalar: no vectors.
func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>) {
  flexsn.scan ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>) {
  ^bb0(%a: f32):
    // expected-error@+1 {{'arith.constant' op uses non-scalar type 'vector<2xf32>': a scan body works on scalars only}}
    %v = arith.constant dense<0.0> : vector<2xf32>
    flexsn.yield %a : f32
  }
  return
}

// -----

// An inline body computes in f32: no bf16 arithmetic.
func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>) {
  flexsn.scan ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>) {
  ^bb0(%a: f32):
    // expected-error@+1 {{'arith.truncf' op computes in 'bf16', but a scan body computes in f32}}
    %b = arith.truncf %a : f32 to bf16
    flexsn.yield %a : f32
  }
  return
}

// -----

// Scans do not nest.
func.func @f(%x: memref<?x?xf32>, %s: memref<?x?xf32>) {
  flexsn.scan ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>) {
  ^bb0(%a: f32):
    // expected-error@+1 {{'flexsn.scan' op cannot be nested in a scan body}}
    flexsn.scan ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>) {
    ^bb0(%b: f32):
      flexsn.yield %b : f32
    }
    flexsn.yield %a : f32
  }
  return
}

// -----

// A parameter needs a default value; the error says so and shows the form.
// expected-error@+1 {{parameter 'tau' needs a default value: %tau: f32 = <value>}}
flexsn.neuron @no_default inputs(%x: f32) outputs(y) params(%tau: f32) {
  flexsn.yield %x : f32
}

// -----

// flexsn.round rounds to a half-precision type only.
func.func @round_to_f32(%x: f32) -> f32 {
  // expected-error @below {{attribute 'narrow_type' failed to satisfy constraint}}
  %r = flexsn.round %x to f32 : f32
  return %r : f32
}
