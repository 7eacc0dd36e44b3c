// RUN: flexsn-opt %s --split-input-file -verify-diagnostics

// expected-error@+2 {{buffer name 'x-1' is not a C identifier}}
// expected-error@+1 {{failed to parse FlexSN_KernelSignatureAttr parameter 'buffers'}}
func.func @name(%x: memref<?x?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x-1", input_sequence, f32, sequence, input 0>]>} {
  return
}

// -----

// expected-error@+2 {{a initial_state buffer ('v0') has shape class per_neuron, not sequence}}
// expected-error@+1 {{failed to parse FlexSN_KernelSignatureAttr parameter 'buffers'}}
func.func @shape(%v0: memref<?x?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"v0", initial_state, f32, sequence, state_init 0>]>} {
  return
}

// -----

// Saved values are f32 or the storage type, not another one.
// expected-error@+1 {{saved buffer 'saved0' holds 'bf16': saved values are f32 or the storage type ('f16')}}
func.func @saved_bf16(%s: memref<?x?xbf16>) attributes {flexsn.kernel = #flexsn.kernel<"n", forward, f16, buffers = [<"saved0", saved_output, bf16, sequence, saved 0>], workspace_sequences = 1>} {
  return
}

// -----

// expected-error@+1 {{two buffers are named 'x'}}
func.func @twice(%x: memref<?x?xf32>, %y: memref<?x?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>, <"x", output_sequence, f32, sequence, output 0>]>} {
  return
}

// -----

// expected-error@+1 {{parameter 'x' has the name of another argument}}
func.func @clash(%x: memref<?x?xf32>, %p: f32) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>], params = [<"x", 1.0 : f32, runtime>]>} {
  return
}

// -----

// expected-error@+1 {{parameter 'a' is const: only runtime and trainable parameters are kernel arguments}}
func.func @const_param(%x: memref<?x?xf32>, %a: f32) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>], params = [<"a", 1.0 : f32, const>]>} {
  return
}

// -----

// expected-error@+1 {{an inference kernel has no param_gradient buffer ('a_grad')}}
func.func @gradient(%x: memref<?x?xf32>, %g: memref<f32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>, <"a_grad", param_gradient, f32, scalar, grad param "a">]>} {
  return
}

// -----

// expected-error@+1 {{a forward kernel's saved buffers are saved_output, not 'saved0'}}
func.func @reads_saved(%s: memref<?x?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", forward, f32, buffers = [<"saved0", saved_input, f32, sequence, saved 0>], workspace_sequences = 1>} {
  return
}

// -----

// expected-error@+1 {{workspace_sequences is 2 but the kernel has 1 saved buffer(s)}}
func.func @workspace(%s: memref<?x?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", forward, f32, buffers = [<"saved0", saved_output, f32, sequence, saved 0>], workspace_sequences = 2>} {
  return
}

// -----

// expected-error@+2 {{the reduction scratch must be the last buffer}}
// expected-error@+1 {{failed to parse FlexSN_CompiledKernelAttr parameter 'signature'}}
module attributes {flexsn.gpu_kernels = [#flexsn.compiled_kernel<"k", <"k", backward, f32, buffers = [<"reduction_scratch", reduction_scratch, f32, scratch, scratch>, <"g", param_gradient, f32, scalar, grad param "g">]>, vector_width = 4, vector_entry = "k_vec", scalar_entry = "k_scalar">]} {
}

// -----

// expected-error@+1 {{a kernel has at least one buffer}}
func.func @empty() attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = []>} {
  return
}

// -----

// expected-error@+1 {{'flexsn.kernel' lists 2 buffer(s) and 0 parameter(s), but the function takes 1 argument(s) and returns 0 value(s)}}
func.func @count(%x: memref<?x?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>, <"y", output_sequence, f32, sequence, output 0>]>} {
  return
}

// -----

// expected-error@+1 {{argument #1 ('memref<?xf32>') is not a sequence memref of 'f32', as buffer 'y' says}}
func.func @rank(%x: memref<?x?xf32>, %y: memref<?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>, <"y", output_sequence, f32, sequence, output 0>]>} {
  return
}

// -----

// expected-error@+1 {{argument #0 ('memref<?x?xf16>') is not a sequence memref of 'f32', as buffer 'x' says}}
func.func @element(%x: memref<?x?xf16>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>]>} {
  return
}

// -----

// expected-error@+1 {{argument #1 ('i32') is not of the type of parameter 'a' ('f32')}}
func.func @param_type(%x: memref<?x?xf32>, %a: i32) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>], params = [<"a", 1.0 : f32, runtime>]>} {
  return
}

// -----

// expected-error@+1 {{buffer 'reduction_scratch': a kernel function takes no reduction scratch (the GPU lowering adds it)}}
func.func @scratch(%x: memref<?x?xf32>, %s: memref<?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", backward, f32, buffers = [<"x", output_sequence, f32, sequence, grad input 0>, <"reduction_scratch", reduction_scratch, f32, scratch, scratch>]>} {
  return
}

// -----

// expected-error@+1 {{'flexsn.kernel' belongs on a kernel function}}
module attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>]>} {
}

// -----

// expected-error@+1 {{'flexsn.kernel' must be a #flexsn.kernel}}
func.func @string(%x: memref<?x?xf32>) attributes {flexsn.kernel = "inference"} {
  return
}

// -----

// expected-error@+1 {{unknown attribute 'flexsn.variant': a kernel function's signature is 'flexsn.kernel'}}
func.func @old(%x: memref<?x?xf32>) attributes {flexsn.variant = "inference"} {
  return
}

// -----

// expected-error@+1 {{'flexsn.cpu_kernels' lists k, a GPU kernel}}
module attributes {flexsn.cpu_kernels = [#flexsn.compiled_kernel<"k", <"k", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>]>, vector_width = 4, vector_entry = "k_vec", scalar_entry = "k_scalar">]} {
}

// -----

// expected-error@+1 {{'flexsn.gpu_kernels' must be an array of #flexsn.compiled_kernel}}
module attributes {flexsn.gpu_kernels = [{name = "k"}]} {
}

// -----

// expected-error@+3 {{expected keyword for what a kernel does with one of its buffers}}
// expected-error@+2 {{failed to parse FlexSN_KernelBufferAttr parameter 'role'}}
// expected-error@+1 {{failed to parse FlexSN_KernelSignatureAttr parameter 'buffers'}}
func.func @role(%x: memref<?x?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x", 7, f32, sequence>]>} {
  return
}

// -----

// expected-error@+2 {{a per_neuron_param buffer ('th') has shape class per_neuron, not scalar}}
// expected-error@+1 {{failed to parse FlexSN_KernelSignatureAttr parameter 'buffers'}}
func.func @per_neuron_shape(%th: memref<f32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"th", per_neuron_param, f32, scalar, param "th" per_neuron>]>} {
  return
}

// -----

// expected-error@+1 {{an inference kernel has no per_neuron_param_gradient buffer ('th_grad')}}
func.func @inference_gradient(%g: memref<?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"th_grad", per_neuron_param_gradient, f32, per_neuron, grad param "th" per_neuron>]>} {
  return
}

// -----

// Bytes hold spikes, which only outputs are.
// expected-error@+2 {{a state_sequence buffer ('v') cannot hold 'i8': only spike outputs (output_sequence) are stored as bytes or bits}}
// expected-error@+1 {{failed to parse FlexSN_KernelSignatureAttr parameter 'buffers'}}
func.func @byte_state(%v: memref<?x?xi8>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"v", state_sequence, i8, sequence, state_seq 0>], options = {spike_storage = "u8"}>} {
  return
}

// -----

// expected-error@+2 {{buffer 'x' must hold f32, f16, bf16, i8 or i1, got 'i16'}}
// expected-error@+1 {{failed to parse FlexSN_KernelSignatureAttr parameter 'buffers'}}
func.func @short(%x: memref<?x?xi16>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x", input_sequence, i16, sequence, input 0>]>} {
  return
}

// -----

// Options select kernels: an empty set says nothing.
// expected-error@+1 {{options, when given, name at least one option}}
func.func @empty_options(%x: memref<?x?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>], options = {}>} {
  return
}

// -----

// An option's value is what the manifest can write: a string, bool or integer.
// expected-error@+1 {{option 'spike_storage' is a string, a bool or an integer}}
func.func @float_option(%x: memref<?x?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>], options = {spike_storage = 1.0 : f32}>} {
  return
}

// -----

// Training outputs carry gradients: no byte spikes.
// expected-error@+1 {{i8 and i1 buffers hold spikes stored compactly, all one way, in an inference or final-state kernel}}
func.func @training(%x: memref<?x?xf32>, %s: memref<?x?xi8>) attributes {flexsn.kernel = #flexsn.kernel<"n", forward, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>, <"s", output_sequence, i8, sequence, output 0>], options = {spike_storage = "u8"}>} {
  return
}

// -----

// Bits hold spikes, which only outputs are.
// expected-error@+2 {{a final_state buffer ('v') cannot hold 'i1': only spike outputs (output_sequence) are stored as bytes or bits}}
// expected-error@+1 {{failed to parse FlexSN_KernelSignatureAttr parameter 'buffers'}}
func.func @bit_state(%v: memref<?xi1>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"v", final_state, i1, per_neuron, state_final 0>], options = {spike_storage = "bits"}>} {
  return
}

// -----

// One storage per kernel: bytes and bits do not mix.
// expected-error@+1 {{i8 and i1 buffers hold spikes stored compactly, all one way, in an inference or final-state kernel}}
func.func @mixed(%s: memref<?x?xi8>, %b: memref<?x?xi1>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"s", output_sequence, i8, sequence, output 0>, <"b", output_sequence, i1, sequence, output 1>], options = {spike_storage = "u8"}>} {
  return
}

// -----

// Training outputs carry gradients: no bit spikes.
// expected-error@+1 {{i8 and i1 buffers hold spikes stored compactly, all one way, in an inference or final-state kernel}}
func.func @training_bits(%x: memref<?x?xf32>, %s: memref<?x?xi1>) attributes {flexsn.kernel = #flexsn.kernel<"n", backward, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>, <"s", output_sequence, i1, sequence, grad input 0>], options = {spike_storage = "bits"}>} {
  return
}

// -----

// A buffer's binding must suit its role: an input sequence holds an input.
// expected-error@+2 {{a input_sequence buffer ('x') cannot bind output 0}}
// expected-error@+1 {{failed to parse FlexSN_KernelSignatureAttr parameter 'buffers'}}
func.func @binds_role(%x: memref<?x?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x", input_sequence, f32, sequence, output 0>]>} {
  return
}

// -----

// A backward kernel's output sequence holds an input's gradient, not the
// input.
// expected-error@+2 {{a output_sequence buffer ('x_grad') cannot bind input 0}}
// expected-error@+1 {{failed to parse FlexSN_KernelSignatureAttr parameter 'buffers'}}
func.func @binds_gradient(%x: memref<?x?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", backward, f32, buffers = [<"x_grad", output_sequence, f32, sequence, input 0>]>} {
  return
}

// -----

// Callers find buffers by binding: two buffers never bind one value.
// expected-error@+1 {{buffers 'y' and 'z' bind the same value}}
func.func @binds_twice(%x: memref<?x?xf32>, %y: memref<?x?xf32>, %z: memref<?x?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>, <"y", output_sequence, f32, sequence, output 1>, <"z", output_sequence, f32, sequence, output 1>]>} {
  return
}

// -----

// A scalar parameter is a kernel argument, never a buffer.
// expected-error@+2 {{a per_neuron_param buffer ('w') cannot bind param "w"}}
// expected-error@+1 {{failed to parse FlexSN_KernelSignatureAttr parameter 'buffers'}}
func.func @binds_scalar_param(%w: memref<?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"w", per_neuron_param, f32, per_neuron, param "w">]>} {
  return
}

// -----

// expected-error@+2 {{expected what the buffer binds (input, state_init, state_seq, state_final, output, param, saved, scratch or coupling), got 'state'}}
// expected-error@+1 {{failed to parse FlexSN_KernelSignatureAttr parameter 'buffers'}}
func.func @binds_unknown(%v: memref<?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"v_init", initial_state, f32, per_neuron, state 0>]>} {
  return
}

// -----

// Saved values and the scratch have no gradient.
// expected-error@+2 {{a saved buffer has no gradient}}
// expected-error@+1 {{failed to parse FlexSN_KernelSignatureAttr parameter 'buffers'}}
func.func @binds_saved_gradient(%s: memref<?x?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", backward, f32, buffers = [<"saved0", saved_input, f32, sequence, grad saved 0>], workspace_sequences = 1>} {
  return
}

// -----

// expected-error@+2 {{a binding's index is not negative, got -1}}
// expected-error@+1 {{failed to parse FlexSN_KernelSignatureAttr parameter 'buffers'}}
func.func @binds_negative(%x: memref<?x?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input -1>]>} {
  return
}

// -----

// A GPU kernel names its two entry points; a CPU kernel has none.
// expected-error@+1 {{kernel 'k': a GPU kernel names its vector_entry and scalar_entry}}
module attributes {flexsn.gpu_kernels = [#flexsn.compiled_kernel<"k", <"k", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>]>, vector_width = 4>]} {
}

// -----

// expected-error@+1 {{kernel 'k': a CPU kernel's entry point is its name: it has no vector_entry or scalar_entry}}
module attributes {flexsn.cpu_kernels = [#flexsn.compiled_kernel<"k", <"k", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>]>, vector_entry = "k_vec">]} {
}

// -----

// expected-error@+1 {{kernel 'k': its vector and scalar entry points are both 'k_vec'}}
module attributes {flexsn.gpu_kernels = [#flexsn.compiled_kernel<"k", <"k", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>]>, vector_width = 4, vector_entry = "k_vec", scalar_entry = "k_vec">]} {
}

// -----

// A coupled kernel names its coupled input and output together.
// expected-error@+1 {{coupled_input and coupled_output are both set (an input and an output of the neuron) or both -1, got 0 and -1}}
func.func @half_coupled(%x: memref<?x?xf32>, %s: memref<?x?xf32>, %w: memref<?x?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>, <"s", output_sequence, f32, sequence, output 0>, <"coupling", coupling_weights, f32, matrix, coupling>], coupled_input = 0>} {
  return
}

// -----

// expected-error@+1 {{a coupled kernel has one coupling_weights buffer, not 0}}
func.func @no_weights(%x: memref<?x?xf32>, %s: memref<?x?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>, <"s", output_sequence, f32, sequence, output 0>], coupled_input = 0, coupled_output = 0>} {
  return
}

// -----

// expected-error@+1 {{a coupling_weights buffer belongs to a coupled kernel (coupled_input, coupled_output)}}
func.func @weights_uncoupled(%x: memref<?x?xf32>, %s: memref<?x?xf32>, %w: memref<?x?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>, <"s", output_sequence, f32, sequence, output 0>, <"coupling", coupling_weights, f32, matrix, coupling>]>} {
  return
}

// -----

// The coupled values are buffers of the kernel: in a backward kernel, the
// gradients of the output and of the input.
// expected-error@+1 {{a coupled kernel has a buffer binding grad input 0}}
func.func @backward_without_input_gradient(%g: memref<?x?xf32>, %w: memref<?x?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", backward, f32, buffers = [<"s_grad", optional_input_sequence, f32, sequence, grad output 0>, <"coupling", coupling_weights, f32, matrix, coupling>], coupled_input = 0, coupled_output = 0>} {
  return
}

// -----

// The weights are an f32 matrix, read-only, and have no gradient.
// expected-error@+2 {{a coupling_weights buffer ('coupling') holds f32, not 'f16'}}
// expected-error@+1 {{failed to parse FlexSN_KernelSignatureAttr parameter 'buffers'}}
func.func @half_weights(%w: memref<?x?xf16>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f16, buffers = [<"coupling", coupling_weights, f16, matrix, coupling>]>} {
  return
}

// -----

// expected-error@+2 {{a coupling buffer has no gradient}}
// expected-error@+1 {{failed to parse FlexSN_KernelSignatureAttr parameter 'buffers'}}
func.func @weights_gradient(%w: memref<?x?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", backward, f32, buffers = [<"coupling", coupling_weights, f32, matrix, grad coupling>]>} {
  return
}

// -----

// expected-error@+1 {{argument #2 ('memref<?xf32>') is not a matrix memref of 'f32', as buffer 'coupling' says}}
func.func @weights_rank(%x: memref<?x?xf32>, %s: memref<?x?xf32>, %w: memref<?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>, <"s", output_sequence, f32, sequence, output 0>, <"coupling", coupling_weights, f32, matrix, coupling>], coupled_input = 0, coupled_output = 0>} {
  return
}
