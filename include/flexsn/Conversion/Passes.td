//===- Passes.td - FlexSN conversion passes ----------------*- tablegen -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_CONVERSION_PASSES_TD
#define FLEXSN_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertFlexSNToSCF : Pass<"convert-flexsn-to-scf", "::mlir::ModuleOp"> {
  let summary = "Lower flexsn.scan to SCF loops: neurons outside, time inside";
  let description = [{
    Rewrites every `flexsn.scan` into a loop nest over the neuron dimensions
    `N...` around an `scf.for` over time carrying the states in registers
    (iteration arguments). Each step loads the inputs (extending `f16`/`bf16`
    to `f32`), emits the step body — the neuron's body with `const`
    parameters replaced by their values and `flexsn.apply` inlined, or the
    scan's own region — and stores the outputs (truncating to the storage
    type; `i8` stores the value converted to an unsigned integer, for 0/1
    spikes; `i1` packs 0/1 spikes 8 per byte, in the layout
    `#flexsn.buffer` documents). Absent buffers (null base pointer) read as zeros or are not
    written. Reductions are summed per neuron over time in registers, then
    added into their rank-0 buffer, which is zeroed first.

    Kernel functions lose their `flexsn.kernel` signature to the module's
    `flexsn.cpu_kernels` list, which the manifest and the CPU runners read.
    Then the `flexsn.neuron` definitions, inlined everywhere, are erased.
    The per-step `flexsn` ops (spike, detach, surrogate_grad) are left for
    `flexsn-expand-surrogates`.

    With `parallel` (as `flexsn-lower-to-cpu` runs it), the neurons are split
    into fixed chunks (4096 consecutive neurons of the innermost neuron
    dimension, at one point of the outer ones) that an OpenMP worksharing
    loop (`omp.parallel` + `omp.wsloop`, static schedule) runs across
    threads. Each kernel function then takes one more argument, last: the
    thread count (`i32`; not positive: OpenMP's default,
    `omp_get_max_threads()`). A reduction that keeps every neuron dimension
    is added in place (each element belongs to one chunk); one that keeps no
    innermost neuron dimension (a total, a per-channel sum) is summed per
    chunk into a partials buffer, and the partials are added in chunk order
    after the loop. A scan with a reduction that keeps the innermost
    dimension but not every outer one, or with spikes packed 8 per byte over
    several neuron dimensions (a byte may span two chunks), runs its chunks
    in order on one thread.

    With `vector-width` W as well, each chunk runs its whole vectors of W
    neurons first, then the rest one at a time. The vectors go one time
    step at a time: their carries (states, sums over time) wait in a
    `[carries, 4096]` buffer of the chunk (`memref.alloca` in an
    `alloca_scope`), and each step runs every vector through the step body
    on `vector<W x T>` values (every body op is elementwise; constants are
    splatted), with `vector.load`/`vector.store` along the innermost neuron
    dimension and one value broadcast to every lane where a buffer does not
    depend on that dimension; sums over neurons are added lane by lane into
    the chunk's partial. A scan whose body has another op, or a buffer not
    contiguous along the neurons (or bit-packed), is not vectorized.

    The steps are emitted twice, under an `scf.if` decided once per scan:
    when the scan holds at least 4 Mi values (T times the neurons) and every
    row of every f32, f16 or bf16 sequence it writes starts at a multiple of
    a vector's bytes, the vectors store those sequences with streaming
    stores (`vector.store {nontemporal = true, alignment = W * bytes}`),
    and an `llvm.fence` ends the chunk's steps; otherwise with plain stores.

    Rationale:
    * Step by step, a chunk reads and writes each `[T, N]` row as one
      contiguous run of 16 KiB, which the prefetchers follow; a vector that
      ran its own time loop would touch T rows `N` elements apart at every
      step (with a power-of-two `N`, all in the same cache sets).
    * A plain store reads each cache line before writing it; a streaming
      store does not, so an output costs one pass over memory instead of
      two. Small outputs keep plain stores: they may still be in cache when
      the next op reads them. The stores need aligned addresses, hence the
      run-time check and the plain copy.

    Rationale:
    * The time loop is innermost so states stay in registers and each neuron
      reads and writes its sequence once.
    * Chunks of a fixed size, and sums added in chunk order, make every
      result, parameter gradients included, bitwise the same for any thread
      count.
  }];
  let options = [
    Option<"parallel", "parallel", "bool", /*default=*/"false",
           "Run fixed chunks of neurons across threads with OpenMP, and give "
           "kernel functions a trailing thread-count argument">,
    Option<"vectorWidth", "vector-width", "unsigned", /*default=*/"0",
           "With parallel: run each chunk's neurons in vectors of this many "
           "lanes where the step body and the buffers allow (0: one at a "
           "time)">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::omp::OpenMPDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
}

def ConvertFlexSNToGPU : Pass<"convert-flexsn-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Turn kernel functions into GPU kernels: neurons across threads";
  let description = [{
    Rewrites every kernel function (a `func.func` with a `flexsn.kernel`
    signature, holding one scan) into
    two `gpu.func` kernels in the `gpu.module @flexsn_kernels`:

    * `<name>_vec`: each thread runs `16 / sizeof(storage)` consecutive
      neurons (4 in `f32`, 8 in `f16`/`bf16`) with 16-byte loads and stores
      (`alignment = 16`), and the last, partial group one neuron at a time;
    * `<name>_scalar`: one neuron per thread, for any alignment.

    Each thread runs the whole time loop with the states in registers, so
    consecutive threads touch consecutive addresses of each `[T, N]` row
    (coalesced), and a sequence is read and written exactly once.

    Kernel parameters (the bare-pointer ABI, see `docs/ABI.md`): one
    `!llvm.ptr` per buffer in the order of the kernel's signature (the
    kernel function's argument order), then `i64` `T`, `N` and `ld` (the
    time stride in elements of every `[T, N]` buffer), then the runtime
    parameters. All index arithmetic is 64-bit. A null buffer is absent.
    Host-side launch is the host stubs' job: the kernel functions are
    erased (the neurons stay, for the manifest), and the module lists each
    kernel in its `flexsn.gpu_kernels` attribute (`#flexsn.compiled_kernel`:
    entry name, signature, vector width) for the header and manifest
    emitters.

    Reductions (the parameter gradients of a backward kernel) are summed per
    thread over its steps and neurons, then per block (a warp shuffle tree,
    then the block's warps in order through workgroup memory), then over
    blocks in one of two modes:

    * atomic (`<name>_vec` / `_scalar`): one `atomicAdd` per block into the
      (runtime-zeroed) result;
    * deterministic (`<name>_deterministic_vec` / `_scalar`, built only for
      kernels with reductions): each block stores its sum into its own slot
      of a reduction scratch (an extra pointer after the buffers: an i32
      ticket counter, then `reductions x blocks` f32), and the block that
      draws the last ticket adds every block's slot in a fixed order. The
      result depends only on the inputs and the launch shape (T, N, ld, and
      vector or scalar kernel), never on scheduling.

    Rationale:
    * Bare pointers instead of memref descriptors: with run-time `T` and
      `N` the descriptor ABI would need five words per buffer, and the host
      stubs would have to build them.
    * The deterministic mode finishes in the same launch (a last-block
      reduction) rather than a second kernel, so every variant stays one
      launch per call; its cost is one scratch write per block and a read
      of all slots by one block.
    * Two kernels rather than a run-time alignment branch in one: the stub
      checks alignment once per call, and the fast kernel has no fallback
      code on its hot path.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::scf::SCFDialect"];
}

#endif // FLEXSN_CONVERSION_PASSES_TD
