/*===- flexsn_runtime.h - FlexSN kernel launch runtime ------------*- C -*-===//
 *
 * Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
 *
 *===----------------------------------------------------------------------===//
 *
 * The C runtime behind the generated host stubs (docs/ABI.md).
 * It depends only on the CUDA driver API, which it loads at run time with
 * dlopen("libcuda.so.1"): a program linking the runtime starts, and argument
 * validation works, on a machine without a GPU or driver. Neither this
 * header nor the runtime needs cuda.h. It needs a CUDA
 * 12.0 or newer driver (for cuCtxGetId).
 *
 * Every function is thread-safe. No function allocates device memory, exits,
 * aborts or throws.
 *
 *===----------------------------------------------------------------------===*/

#ifndef FLEXSN_RUNTIME_FLEXSN_RUNTIME_H
#define FLEXSN_RUNTIME_FLEXSN_RUNTIME_H

#include "flexsn_status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA driver's stream handle: cuda.h's CUstream is the same type (same
   struct tag), so a program passes its CUstream as is. This header needs no
   cuda.h, before or after it. */
typedef struct CUstream_st *flexsn_stream;

/* The index (in the kernel's buffer order) of the buffer that the last
   failed flexsn_launch on this thread was about: a required one that was
   NULL, a misaligned one, one of another context or too small. -1 when the
   failure concerned no single buffer, or the last launch succeeded. */
int flexsn_last_failed_buffer(void);

/* The CUresult of the last failed driver call on this thread (0 when none
   failed yet): the cause behind FLEXSN_ERROR_CUDA / _LAUNCH / _MODULE_LOAD /
   _NO_DRIVER (cuInit), for diagnostics. */
int flexsn_last_cuda_error(void);

/* An embedded kernel image (cubin, fatbin or PTX text), loaded lazily once per
   CUDA context, thread-safe. Define it with FLEXSN_IMAGE_INIT (or zero `state`)
   and give it static storage duration. */
typedef struct flexsn_image {
  const unsigned char *data;
  size_t size;
  void *state; /* owned by the runtime; zero-initialize */
} flexsn_image;
#define FLEXSN_IMAGE_INIT(data, size) {(data), (size), NULL}

/* Unloads the image from every context it was loaded into; contexts destroyed
   since are skipped (their modules went with them). Safe to call twice and on
   a never-loaded image; must not run concurrently with flexsn_launch on the
   same image. A later launch loads the image again. Returns FLEXSN_ERROR_CUDA
   if some cuModuleUnload failed (the bookkeeping is released anyway). */
flexsn_status flexsn_image_unload(flexsn_image *image);

typedef enum flexsn_buffer_kind {
  FLEXSN_INPUT_SEQUENCE,  /* [T, N] read, required */
  FLEXSN_INITIAL_STATE,   /* [N] read, NULL = zeros */
  FLEXSN_OUTPUT_SEQUENCE, /* [T, N] written, NULL = not written */
  FLEXSN_STATE_SEQUENCE,  /* [T, N] written, NULL = not written */
  FLEXSN_FINAL_STATE,     /* [N] written, NULL = not written */
  /* Training kernels: */
  FLEXSN_OPTIONAL_INPUT_SEQUENCE, /* [T, N] read, NULL = zeros (gradients) */
  FLEXSN_SAVED_OUTPUT,            /* [T, N] written, required (the workspace) */
  FLEXSN_SAVED_INPUT,             /* [T, N] read, required (the workspace) */
  FLEXSN_PARAM_GRADIENT, /* one float, zeroed then accumulated, required */
  /* Deterministic kernels (at most one per kernel): an int32 ticket counter,
     then one float per parameter gradient and block. Required, written; its
     extent is 4 + 4 * P * ceil(N / 256) bytes for P FLEXSN_PARAM_GRADIENT
     buffers; the runtime zeroes the counter before each launch. Any
     4-byte alignment (the header places it in the training workspace). */
  FLEXSN_REDUCTION_SCRATCH,
  /* Per-neuron parameters: */
  FLEXSN_PER_NEURON_PARAM,          /* [N] float read, required */
  FLEXSN_PER_NEURON_PARAM_GRADIENT, /* [N] float written (sums over T),
                                       required */
  /* Per-channel parameters (flexsn_launch_channels): */
  FLEXSN_PER_CHANNEL_PARAM,          /* [C] float read, required */
  FLEXSN_PER_CHANNEL_PARAM_GRADIENT, /* [C] float, zeroed then accumulated
                                       (sums over T and the channel's
                                       neurons), required */
  /* Coupled kernels (flexsn_launch_coupled): */
  FLEXSN_COUPLING_WEIGHTS /* [H, H] float read, required */
} flexsn_buffer_kind;

/* The kind whose role name (as the manifest spells it: "input_sequence",
   "initial_state", ..., "reduction_scratch") is `role`; -1 for none. Lets
   bindings read kinds from a manifest without copying this enum. */
int flexsn_buffer_kind_from_role(const char *role);

/* Upper bound on num_buffers + num_scalars (the kernel parameter array lives
   on the stack: launches allocate nothing). */
#define FLEXSN_MAX_KERNEL_ARGS 128

typedef struct flexsn_kernel_desc {
  const char *vector_kernel; /* entry name using vector_width neurons per thread
                                and 16-byte accesses; needs every non-NULL
                                buffer 16-byte aligned (bit-packed
                                ones vector_width / 8) and
                                ld % vector_width == 0 */
  const char *scalar_kernel; /* entry name, one neuron per thread, any 4/2-byte
                                alignment */
  int vector_width;
  int element_size; /* bytes per element of every buffer: 4 or 2 */
  int num_buffers;
  const flexsn_buffer_kind *kinds;
  int num_scalars;          /* runtime parameters, passed after T, N, ld */
  const int *element_sizes; /* per buffer (training kernels mix f32 saved
                               values with f16 data; an output sequence of
                               spikes stored as bytes has 1, as bits
                               FLEXSN_BIT_PACKED); NULL: element_size */
} flexsn_kernel_desc;

/* The element_sizes entry of an output sequence of bit-packed spikes: the
   spike of neuron n at step t is bit n % 8 (least significant first) of
   byte t * ceil(ld / 8) + n / 8; each row's bits past N are written as
   zeros. Its extent is (T-1) * ceil(ld / 8) + ceil(N / 8) bytes, at any
   alignment. */
#define FLEXSN_BIT_PACKED 0

/* Validates, then launches one kernel on `stream` computing T steps of N
   neurons.

   Kernel parameters, in order: one CUdeviceptr per buffer (NULL where the kind
   allows), then int64 T, int64 N, int64 ld, then the scalars (`scalars[i]`
   points to the value: float, int8 for i1, int32). ld is the time stride of
   every [T, N] buffer in elements; 0 means N (the kernel receives the
   resolved value). Grid: 256 threads per block, ceil(N / width / 256) blocks
   on x (width = vector_width for the vector kernel, else 1).

   T == 0 or N == 0 launches no kernel. Parameter gradients are then zeroed
   (cuMemsetD8Async: the gradient of an empty problem), and for T == 0 and
   N > 0 each non-NULL FLEXSN_FINAL_STATE buffer receives its matching
   FLEXSN_INITIAL_STATE (the k-th final state pairs with the k-th initial
   state; N elements of the final state's element size) by
   cuMemcpyDtoDAsync, or zeros by cuMemsetD8Async when that initial state is
   NULL; nothing else is touched. Without such writes the call makes no
   driver call at all.

   Checks, before any driver call, in this order:
     - image, its data, desc malformed (NULL names, width < 1, element_size not
       2 or 4, an element_sizes entry not 2 or 4 (or 1 or FLEXSN_BIT_PACKED
       for an output sequence), negative counts, num_buffers + num_scalars >
       FLEXSN_MAX_KERNEL_ARGS, kinds or buffers NULL when num_buffers > 0, a
       kind out of range, more final states than initial states, more than
       one FLEXSN_REDUCTION_SCRATCH, scalars or a
       scalars[i] NULL when num_scalars > 0)       -> INVALID_ARGUMENT
     - T < 0 or N < 0                              -> NEGATIVE_SIZE
     - ld < 0 or (ld != 0 and ld < N)              -> BAD_STRIDE
     - (flexsn_launch_channels) bad C or S        -> BAD_CHANNELS
     - a required buffer NULL (input sequence,
       saved values, parameter gradient, scratch)  -> NULL_POINTER
     - the element count (T-1)*ld + N of a [T, N] buffer overflowing int64
       (whether or not the kernel has one), a buffer's extent in bytes
       overflowing int64, or ceil(N / 256) > 2^31-1  -> SIZE_OVERFLOW
     - a buffer not aligned to element_size        -> INVALID_ARGUMENT
   Then, with the driver, for the buffers the call touches (all non-NULL ones
   for a launch; parameter gradients, and finals with their initials, for an
   empty problem):
     - driver unavailable                          -> NO_DRIVER
     - no current context (and none adopted: with no context current, the
       primary context of the first non-NULL buffer's device is made current
       when its owner has activated it, as the CUDA runtime would)
                                                   -> NO_CONTEXT
     - the stream's context is not the current one -> CONTEXT_MISMATCH
     - a buffer neither allocated in the current context nor managed, nor
       host memory mapped into it, nor (virtual-memory / pool allocations)
       accessible to its device                    -> CONTEXT_MISMATCH
     - the allocation ends before the extent       -> BUFFER_TOO_SMALL
   Then it picks the vector kernel when its alignment needs hold, else the
   scalar one, gets the function (loading the image into the current context
   the first time) and launches: MODULE_LOAD, KERNEL_NOT_FOUND, LAUNCH or CUDA
   on failure. */
flexsn_status flexsn_launch(flexsn_image *image, const flexsn_kernel_desc *desc,
                            flexsn_stream stream, int64_t T, int64_t N,
                            int64_t ld, void *const *buffers,
                            const void *const *scalars);

/* flexsn_launch for kernels with per-channel buffers: the N neurons are
   [B, C, S] (batch, C channels, S neurons per channel and sample, e.g.
   S = H * W), so neuron n is in channel (n / S) mod C; per-channel buffers
   hold C floats. Such a kernel takes int64 C and int64 S after ld.
   Checked after BAD_STRIDE: C >= 1, C <= 2^31-1, S >= 1 and N a multiple
   of C * S, else BAD_CHANNELS (so flexsn_launch, which passes C = S = 0,
   refuses these kernels). Per-channel gradients are zeroed before the
   launch, and also when T == 0 or N == 0. For a kernel without per-channel
   buffers, C and S are ignored. The per-channel buffers need only 4-byte
   alignment; their gradient is summed with atomics, in no fixed order. */
flexsn_status flexsn_launch_channels(flexsn_image *image,
                                     const flexsn_kernel_desc *desc,
                                     flexsn_stream stream, int64_t T, int64_t N,
                                     int64_t ld, int64_t C, int64_t S,
                                     void *const *buffers,
                                     const void *const *scalars);

/* flexsn_launch for a coupled (recurrent) kernel, one with a
   FLEXSN_COUPLING_WEIGHTS buffer M (H x H floats, row-major): its N neurons
   are N / H samples of H, and input i of neuron j of a sample at step t
   gains sum over k of M[k][j] times output o of the sample's neuron k at
   the step before (a backward kernel: the adjoint; docs/ABI.md). Such a
   kernel takes int64 H after ld. Checked after BAD_STRIDE: 1 <= H <= 256 *
   vector_width, N a multiple of H, and N / H <= 2^31-1, else BAD_COUPLING
   (so flexsn_launch, which passes no H, refuses these kernels, and this
   function refuses the others). Grid: N / H blocks of 256 threads, one
   sample each: the scalar kernel for H <= 256, else the vector kernel
   (vector_width neurons per thread). Parameter gradients are summed with
   atomics. */
flexsn_status flexsn_launch_coupled(flexsn_image *image,
                                    const flexsn_kernel_desc *desc,
                                    flexsn_stream stream, int64_t T, int64_t N,
                                    int64_t ld, int64_t H, void *const *buffers,
                                    const void *const *scalars);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLEXSN_RUNTIME_FLEXSN_RUNTIME_H */
