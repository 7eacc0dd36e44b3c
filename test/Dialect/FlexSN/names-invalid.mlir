// RUN: flexsn-opt %s -split-input-file -verify-diagnostics

// Names the generated host stubs and kernels could not use (names-header.test
// compiles a header from every kind of name these rules accept). Inputs,
// states and parameters are checked while parsing, outputs by the verifier.

//===----------------------------------------------------------------------===//
// The host stubs' own arguments and locals
//===----------------------------------------------------------------------===//

// A stub is flexsn_<kernel>(flexsn_stream stream, int64_t T, int64_t N,
// int64_t ld, ...): a parameter named T would be a second T.
// expected-error@+1 {{custom op 'flexsn.neuron' parameter name 'T' is an argument or local variable of the generated host stubs}}
flexsn.neuron @param_T inputs(%x: f32) outputs(s) params(%T: f32 = 1.0 runtime) {
  flexsn.yield %x : f32
}

// -----

// expected-error@+1 {{custom op 'flexsn.neuron' input name 'N' is an argument or local variable of the generated host stubs}}
flexsn.neuron @input_N inputs(%N: f32) outputs(s) {
  flexsn.yield %N : f32
}

// -----

// expected-error@+1 {{custom op 'flexsn.neuron' state name 'ld' is an argument or local variable of the generated host stubs}}
flexsn.neuron @state_ld inputs(%x: f32) states(%ld: f32) outputs(s) {
  flexsn.yield %x, %ld : f32, f32
}

// -----

// expected-error@+1 {{'flexsn.neuron' op output name 'stream' is an argument or local variable of the generated host stubs}}
flexsn.neuron @output_stream inputs(%x: f32) outputs(stream) {
  flexsn.yield %x : f32
}

// -----

// Per-channel stubs take C and S.
// expected-error@+1 {{parameter name 'S' is an argument or local variable of the generated host stubs}}
flexsn.neuron @param_S inputs(%x: f32) outputs(s) params(%S: f32 = 1.0 runtime per_channel) {
  flexsn.yield %x : f32
}

// -----

// Training stubs take the workspace and compute where its parts lie.
// expected-error@+1 {{input name 'workspace_bytes' is an argument or local variable of the generated host stubs}}
flexsn.neuron @input_workspace_bytes inputs(%workspace_bytes: f32) outputs(s) {
  flexsn.yield %workspace_bytes : f32
}

// -----

// expected-error@+1 {{'flexsn.neuron' op output name 'scalars' is an argument or local variable of the generated host stubs}}
flexsn.neuron @output_scalars inputs(%x: f32) outputs(scalars) {
  flexsn.yield %x : f32
}

// -----

//===----------------------------------------------------------------------===//
// Macros, reserved identifiers and the headers' types
//===----------------------------------------------------------------------===//

// NULL is a macro of stddef.h.
// expected-error@+1 {{parameter name 'NULL' is a macro C compilers, the C library or cuda.h define}}
flexsn.neuron @param_NULL inputs(%x: f32) outputs(s) params(%NULL: f32 = 1.0 runtime) {
  flexsn.yield %x : f32
}

// -----

// cuda.h's CU_LAUNCH_PARAM_END is ((void*)0x00).
// expected-error@+1 {{input name 'CU_LAUNCH_PARAM_END' is a macro C compilers, the C library or cuda.h define}}
flexsn.neuron @input_macro inputs(%CU_LAUNCH_PARAM_END: f32) outputs(s) {
  flexsn.yield %CU_LAUNCH_PARAM_END : f32
}

// -----

// stdint.h's limits.
// expected-error@+1 {{'flexsn.neuron' op output name 'INT32_MAX' is a macro C compilers, the C library or cuda.h define}}
flexsn.neuron @output_limit inputs(%x: f32) outputs(INT32_MAX) {
  flexsn.yield %x : f32
}

// -----

// C and C++ reserve names starting with '__' or '_' and a capital.
// expected-error@+1 {{state name '_Bool' is reserved in C and C++ (it starts with '__' or '_' and a capital letter)}}
flexsn.neuron @state_reserved inputs(%x: f32) states(%_Bool: f32) outputs(s) {
  flexsn.yield %x, %_Bool : f32, f32
}

// -----

// expected-error@+1 {{parameter name '__v' is reserved in C and C++}}
flexsn.neuron @param_reserved inputs(%x: f32) outputs(s) params(%__v: f32 = 1.0) {
  flexsn.yield %x : f32
}

// -----

// flexsn_* and FLEXSN_* are the headers' own: a parameter named
// flexsn_launch would hide the function every stub calls.
// expected-error@+1 {{parameter name 'flexsn_launch' is reserved for the names FlexSN's headers define (flexsn_*, FLEXSN_*)}}
flexsn.neuron @param_flexsn inputs(%x: f32) outputs(s) params(%flexsn_launch: f32 = 1.0 runtime) {
  flexsn.yield %x : f32
}

// -----

// A stub casts its buffers through uintptr_t and sizes through size_t.
// expected-error@+1 {{input name 'uintptr_t' names a C type of the host stubs' headers}}
flexsn.neuron @input_type inputs(%uintptr_t: f32) outputs(s) {
  flexsn.yield %uintptr_t : f32
}

// -----

// expected-error@+1 {{parameter name 'size_t' names a C type of the host stubs' headers}}
flexsn.neuron @param_type inputs(%x: f32) outputs(s) params(%size_t: i32 = 1 runtime) {
  flexsn.yield %x : f32
}

// -----

// GCC and Clang define linux as 1 in their default (GNU) modes.
// expected-error@+1 {{'flexsn.neuron' op output name 'linux' is a macro C compilers, the C library or cuda.h define}}
flexsn.neuron @output_linux inputs(%x: f32) outputs(linux) {
  flexsn.yield %x : f32
}

// -----

// complex.h defines complex as _Complex.
// expected-error@+1 {{state name 'complex' is a macro C compilers, the C library or cuda.h define}}
flexsn.neuron @state_complex inputs(%x: f32) states(%complex: f32) outputs(s) {
  flexsn.yield %x, %complex : f32, f32
}

// -----

// C++ keywords are keywords of a C++ translation unit including the header.
// expected-error@+1 {{parameter name 'xor' is a C, C++ or Python keyword}}
flexsn.neuron @param_xor inputs(%x: f32) outputs(s) params(%xor: i1 = false runtime) {
  flexsn.yield %x : f32
}

// -----

// expected-error@+1 {{input name 'constexpr' is a C, C++ or Python keyword}}
flexsn.neuron @input_constexpr inputs(%constexpr: f32) outputs(s) {
  flexsn.yield %constexpr : f32
}

// -----

// The generic form gets the checks from the verifier.
// expected-error@+1 {{'flexsn.neuron' op state name 'desc' is an argument or local variable of the generated host stubs}}
"flexsn.neuron"() <{input_names = ["x"], output_names = ["s"], params = [],
                    state_names = ["desc"], sym_name = "n"}> ({
^bb0(%x: f32, %v: f32):
  "flexsn.yield"(%x, %v) : (f32, f32) -> ()
}) : () -> ()

// -----

//===----------------------------------------------------------------------===//
// Names that collide with the buffers the kernels derive from other names
//===----------------------------------------------------------------------===//

// The final-state kernel names state v's buffer v_final.
// expected-error@+1 {{'flexsn.neuron' op would give two kernel arguments the name 'v_final': the final state of state 'v' and parameter 'v_final'}}
flexsn.neuron @param_v_final inputs(%x: f32) states(%v: f32) outputs(s) params(%v_final: f32 = 1.0) {
  flexsn.yield %x, %v : f32, f32
}

// -----

// The inference kernel names it v_seq, and its initial state v_init.
// expected-error@+1 {{'flexsn.neuron' op would give two kernel arguments the name 'v_seq': the state sequence of state 'v' and output 'v_seq'}}
flexsn.neuron @output_v_seq inputs(%x: f32) states(%v: f32) outputs(v_seq) {
  flexsn.yield %x, %v : f32, f32
}

// -----

// expected-error@+1 {{'flexsn.neuron' op would give two kernel arguments the name 'v_init': input 'v_init' and the initial state of state 'v'}}
flexsn.neuron @input_v_init inputs(%v_init: f32) states(%v: f32) outputs(s) {
  flexsn.yield %v_init, %v : f32, f32
}

// -----

// The backward kernel names the gradients <name>_grad.
// expected-error@+1 {{'flexsn.neuron' op would give two kernel arguments the name 'x_grad': the gradient of input 'x' and input 'x_grad'}}
flexsn.neuron @input_x_grad inputs(%x: f32, %x_grad: f32) outputs(s) {
  flexsn.yield %x : f32
}

// -----

// ...the state sequence's gradient <state>_seq_grad...
// expected-error@+1 {{'flexsn.neuron' op would give two kernel arguments the name 'v_seq_grad': the gradient of the state sequence of state 'v' and parameter 'v_seq_grad'}}
flexsn.neuron @param_v_seq_grad inputs(%x: f32) states(%v: f32) outputs(s) params(%v_seq_grad: f32 = 1.0 trainable) {
  flexsn.yield %x, %v : f32, f32
}

// -----

// ...and a trainable parameter's gradient <param>_grad (any parameter:
// flexsn-set-params can make a const one trainable).
// expected-error@+1 {{'flexsn.neuron' op would give two kernel arguments the name 'tau_grad': output 'tau_grad' and the gradient of parameter 'tau'}}
flexsn.neuron @output_tau_grad inputs(%x: f32) outputs(tau_grad) params(%tau: f32 = 2.0) {
  flexsn.yield %x : f32
}

// -----

// An output and an input are buffers of the same kernels.
// expected-error@+1 {{'flexsn.neuron' op would give two kernel arguments the name 'x': input 'x' and output 'x'}}
flexsn.neuron @output_x inputs(%x: f32) outputs(x) {
  flexsn.yield %x : f32
}

// -----

// Training kernels name their saved buffers saved0, saved1...
// expected-error@+1 {{'flexsn.neuron' op would name input 'saved0' 'saved0', the name of a training kernel's saved buffer (saved0, saved1, ...)}}
flexsn.neuron @input_saved0 inputs(%saved0: f32) outputs(s) {
  flexsn.yield %saved0 : f32
}

// -----

// A host stub passes an i1 parameter p as a byte, p_i8.
// expected-error@+1 {{'flexsn.neuron' op would give two kernel arguments the name 'hard_i8': the host stubs' byte copy of i1 parameter 'hard' and parameter 'hard_i8'}}
flexsn.neuron @param_i8 inputs(%x: f32) outputs(s) params(%hard: i1 = true runtime, %hard_i8: f32 = 1.0) {
  flexsn.yield %x : f32
}

// -----

// The derived names follow the rules of names too: state `_` would give
// `__init`.
// expected-error@+1 {{'flexsn.neuron' op would name the initial state of state '_' '__init', which is reserved in C and C++ (it starts with '__' or '_' and a capital letter)}}
flexsn.neuron @state_underscore inputs(%x: f32) states(%_: f32) outputs(s) {
  flexsn.yield %x, %_ : f32, f32
}

// -----

//===----------------------------------------------------------------------===//
// Kernel buffers and block names follow the same rules
//===----------------------------------------------------------------------===//

// expected-error@+2 {{buffer name 'ld' is an argument or local variable of the generated host stubs}}
// expected-error@+1 {{failed to parse FlexSN_KernelSignatureAttr parameter 'buffers'}}
func.func @buffer_ld(%x: memref<?x?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"ld", input_sequence, f32, sequence, input 0>]>} {
  return
}

// -----

// expected-error@+1 {{'flexsn.name' "NULL" is a macro C compilers, the C library or cuda.h define}}
func.func @block_name(%x: tensor<?x?xf32> {flexsn.name = "NULL"}) -> tensor<?x?xf32> attributes {flexsn.block} {
  return %x : tensor<?x?xf32>
}
