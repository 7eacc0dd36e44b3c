/*===- flexsn_runtime.c - FlexSN kernel launch runtime -------------------===//
 *
 * Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
 *
 *===----------------------------------------------------------------------===//
 *
 * Validation and kernel launch for the generated host stubs (see
 * include/flexsn/Runtime/flexsn_runtime.h): everything a launch checks
 * against its flexsn_kernel_desc needs no device, and runs (and fails
 * cleanly) on machines without one; what needs the device is asked of the
 * image's backend (flexsn_backend.h; flexsn_runtime_cuda.c is CUDA's).
 *
 *===----------------------------------------------------------------------===*/

#define _POSIX_C_SOURCE 200809L /* pthread, dlopen under -std=c99 */

#include "flexsn_backend.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/*===----------------------------------------------------------------------===//
 * The buffer a failure is about, per thread
 *===----------------------------------------------------------------------===*/

/* The buffer a failed flexsn_launch on this thread blamed; -1 for none. */
static FLEXSN_THREAD_LOCAL int g_failed_buffer = -1;

int flexsn_last_failed_buffer(void) { return g_failed_buffer; }

/* Records which buffer a failing check is about. */
static flexsn_status blame(int buffer, flexsn_status status) {
  g_failed_buffer = buffer;
  return status;
}

const char *flexsn_status_name(flexsn_status status) {
  switch (status) {
#define FLEXSN_STATUS_NAME(name)                                               \
  case name:                                                                   \
    return #name;
    FLEXSN_STATUS_NAME(FLEXSN_SUCCESS)
    FLEXSN_STATUS_NAME(FLEXSN_ERROR_NULL_POINTER)
    FLEXSN_STATUS_NAME(FLEXSN_ERROR_NEGATIVE_SIZE)
    FLEXSN_STATUS_NAME(FLEXSN_ERROR_BAD_STRIDE)
    FLEXSN_STATUS_NAME(FLEXSN_ERROR_SIZE_OVERFLOW)
    FLEXSN_STATUS_NAME(FLEXSN_ERROR_INVALID_ARGUMENT)
    FLEXSN_STATUS_NAME(FLEXSN_ERROR_NO_DRIVER)
    FLEXSN_STATUS_NAME(FLEXSN_ERROR_NO_CONTEXT)
    FLEXSN_STATUS_NAME(FLEXSN_ERROR_CONTEXT_MISMATCH)
    FLEXSN_STATUS_NAME(FLEXSN_ERROR_BUFFER_TOO_SMALL)
    FLEXSN_STATUS_NAME(FLEXSN_ERROR_MODULE_LOAD)
    FLEXSN_STATUS_NAME(FLEXSN_ERROR_KERNEL_NOT_FOUND)
    FLEXSN_STATUS_NAME(FLEXSN_ERROR_LAUNCH)
    FLEXSN_STATUS_NAME(FLEXSN_ERROR_CUDA)
    FLEXSN_STATUS_NAME(FLEXSN_ERROR_BAD_CHANNELS)
    FLEXSN_STATUS_NAME(FLEXSN_ERROR_BAD_COUPLING)
#undef FLEXSN_STATUS_NAME
  }
  return "FLEXSN_UNKNOWN_STATUS";
}

int flexsn_buffer_kind_from_role(const char *role) {
  static const struct {
    const char *role;
    flexsn_buffer_kind kind;
  } kinds[] = {
      {"input_sequence", FLEXSN_INPUT_SEQUENCE},
      {"initial_state", FLEXSN_INITIAL_STATE},
      {"output_sequence", FLEXSN_OUTPUT_SEQUENCE},
      {"state_sequence", FLEXSN_STATE_SEQUENCE},
      {"final_state", FLEXSN_FINAL_STATE},
      {"optional_input_sequence", FLEXSN_OPTIONAL_INPUT_SEQUENCE},
      {"saved_output", FLEXSN_SAVED_OUTPUT},
      {"saved_input", FLEXSN_SAVED_INPUT},
      {"param_gradient", FLEXSN_PARAM_GRADIENT},
      {"reduction_scratch", FLEXSN_REDUCTION_SCRATCH},
      {"per_neuron_param", FLEXSN_PER_NEURON_PARAM},
      {"per_neuron_param_gradient", FLEXSN_PER_NEURON_PARAM_GRADIENT},
      {"per_channel_param", FLEXSN_PER_CHANNEL_PARAM},
      {"per_channel_param_gradient", FLEXSN_PER_CHANNEL_PARAM_GRADIENT},
      {"coupling_weights", FLEXSN_COUPLING_WEIGHTS}};
  size_t i;
  if (!role)
    return -1;
  for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); ++i)
    if (strcmp(role, kinds[i].role) == 0)
      return (int)kinds[i].kind;
  return -1;
}

const char *flexsn_status_message(flexsn_status status) {
  switch (status) {
  case FLEXSN_SUCCESS:
    return "success";
  case FLEXSN_ERROR_NULL_POINTER:
    return "a required buffer (an input, the workspace, a parameter's values "
           "or gradient) is NULL";
  case FLEXSN_ERROR_NEGATIVE_SIZE:
    return "T or N is negative";
  case FLEXSN_ERROR_BAD_STRIDE:
    return "the time stride ld is negative or smaller than N";
  case FLEXSN_ERROR_SIZE_OVERFLOW:
    return "a buffer's extent in bytes overflows int64, or N is too large "
           "for the grid";
  case FLEXSN_ERROR_INVALID_ARGUMENT:
    return "invalid argument: malformed kernel descriptor, missing scalars, "
           "or a buffer misaligned to the element size";
  case FLEXSN_ERROR_NO_DRIVER:
    return "the CUDA driver (libcuda.so.1) could not be loaded or initialized";
  case FLEXSN_ERROR_NO_CONTEXT:
    return "no current CUDA context on the calling thread";
  case FLEXSN_ERROR_CONTEXT_MISMATCH:
    return "a buffer or the stream belongs to another CUDA context, or a "
           "buffer is not device-accessible memory";
  case FLEXSN_ERROR_BUFFER_TOO_SMALL:
    return "the allocation holding a buffer ends before the buffer's extent";
  case FLEXSN_ERROR_MODULE_LOAD:
    return "the kernel image could not be loaded (e.g. its architecture does "
           "not match the device)";
  case FLEXSN_ERROR_KERNEL_NOT_FOUND:
    return "the kernel image has no entry of that name";
  case FLEXSN_ERROR_LAUNCH:
    return "the kernel launch failed";
  case FLEXSN_ERROR_CUDA:
    return "a CUDA driver call failed";
  case FLEXSN_ERROR_BAD_CHANNELS:
    return "a kernel with per-channel parameters needs C >= 1 channels "
           "(at most 2^31-1) of S >= 1 neurons, with N a multiple of C * S";
  case FLEXSN_ERROR_BAD_COUPLING:
    return "a coupled kernel needs flexsn_launch_coupled, 1 <= H <= 256 * "
           "vector_width and N a multiple of H; other kernels take no H";
  }
  return "unknown status";
}

/*===----------------------------------------------------------------------===//
 * Backends
 *===----------------------------------------------------------------------===*/

/* The backends, tried in order: those added first, CUDA's last. */
static const flexsn_backend *g_backends[5] = {&flexsn_cuda_backend};
static int g_num_backends = 1;
static pthread_mutex_t g_backends_lock = PTHREAD_MUTEX_INITIALIZER;

int flexsn_add_backend(const flexsn_backend *backend) {
  int added = 0, i;
  pthread_mutex_lock(&g_backends_lock);
  if (backend &&
      g_num_backends < (int)(sizeof g_backends / sizeof *g_backends)) {
    for (i = g_num_backends; i > 0; --i)
      g_backends[i] = g_backends[i - 1];
    g_backends[0] = backend;
    ++g_num_backends;
    added = 1;
  }
  pthread_mutex_unlock(&g_backends_lock);
  return added;
}

/* The backend that runs `image` (non-NULL: CUDA's accepts every image). */
static const flexsn_backend *backend_of(const flexsn_image *image) {
  const flexsn_backend *found = NULL;
  int i;
  pthread_mutex_lock(&g_backends_lock);
  for (i = 0; i < g_num_backends && !found; ++i)
    if (g_backends[i]->accepts(image))
      found = g_backends[i];
  pthread_mutex_unlock(&g_backends_lock);
  return found;
}

flexsn_status flexsn_image_unload(flexsn_image *image) {
  if (!image)
    return FLEXSN_ERROR_INVALID_ARGUMENT;
  return backend_of(image)->unload(image);
}

/*===----------------------------------------------------------------------===//
 * Validation
 *===----------------------------------------------------------------------===*/

static int is_sequence(flexsn_buffer_kind kind) {
  return kind == FLEXSN_INPUT_SEQUENCE || kind == FLEXSN_OUTPUT_SEQUENCE ||
         kind == FLEXSN_STATE_SEQUENCE ||
         kind == FLEXSN_OPTIONAL_INPUT_SEQUENCE ||
         kind == FLEXSN_SAVED_OUTPUT || kind == FLEXSN_SAVED_INPUT;
}

static int is_written(flexsn_buffer_kind kind) {
  return kind == FLEXSN_OUTPUT_SEQUENCE || kind == FLEXSN_STATE_SEQUENCE ||
         kind == FLEXSN_FINAL_STATE || kind == FLEXSN_SAVED_OUTPUT ||
         kind == FLEXSN_PARAM_GRADIENT || kind == FLEXSN_REDUCTION_SCRATCH ||
         kind == FLEXSN_PER_NEURON_PARAM_GRADIENT ||
         kind == FLEXSN_PER_CHANNEL_PARAM_GRADIENT;
}

static int is_required(flexsn_buffer_kind kind) {
  return kind == FLEXSN_INPUT_SEQUENCE || kind == FLEXSN_SAVED_OUTPUT ||
         kind == FLEXSN_SAVED_INPUT || kind == FLEXSN_PARAM_GRADIENT ||
         kind == FLEXSN_REDUCTION_SCRATCH || kind == FLEXSN_PER_NEURON_PARAM ||
         kind == FLEXSN_PER_NEURON_PARAM_GRADIENT ||
         kind == FLEXSN_PER_CHANNEL_PARAM ||
         kind == FLEXSN_PER_CHANNEL_PARAM_GRADIENT ||
         kind == FLEXSN_COUPLING_WEIGHTS;
}

static int is_per_channel(flexsn_buffer_kind kind) {
  return kind == FLEXSN_PER_CHANNEL_PARAM ||
         kind == FLEXSN_PER_CHANNEL_PARAM_GRADIENT;
}

/* Buffers the kernel touches one element at a time (no 16-byte vectors). */
static int is_scalar_access(flexsn_buffer_kind kind) {
  return kind == FLEXSN_PARAM_GRADIENT || kind == FLEXSN_REDUCTION_SCRATCH ||
         kind == FLEXSN_COUPLING_WEIGHTS || is_per_channel(kind);
}

static int count_kind(const flexsn_kernel_desc *desc, flexsn_buffer_kind kind) {
  int i, count = 0;
  for (i = 0; i < desc->num_buffers; ++i)
    count += desc->kinds[i] == kind;
  return count;
}

static int64_t element_size_of(const flexsn_kernel_desc *desc, int i) {
  return desc->element_sizes ? desc->element_sizes[i] : desc->element_size;
}

static flexsn_status check_desc(const flexsn_image *image,
                                const flexsn_kernel_desc *desc,
                                void *const *buffers,
                                const void *const *scalars) {
  int i, initials = 0, finals = 0;
  if (!image || !image->data || image->size == 0 || !desc ||
      !desc->vector_kernel || !desc->scalar_kernel || desc->vector_width < 1 ||
      (desc->element_size != 2 && desc->element_size != 4) ||
      desc->num_buffers < 0 || desc->num_scalars < 0 ||
      desc->num_buffers > FLEXSN_MAX_KERNEL_ARGS ||
      desc->num_scalars > FLEXSN_MAX_KERNEL_ARGS - desc->num_buffers)
    return FLEXSN_ERROR_INVALID_ARGUMENT;
  if (desc->num_buffers > 0 && (!desc->kinds || !buffers))
    return FLEXSN_ERROR_INVALID_ARGUMENT;
  for (i = 0; i < desc->num_buffers; ++i) {
    switch (desc->kinds[i]) {
    case FLEXSN_INITIAL_STATE:
      ++initials;
      break;
    case FLEXSN_FINAL_STATE:
      ++finals;
      break;
    case FLEXSN_INPUT_SEQUENCE:
    case FLEXSN_OUTPUT_SEQUENCE:
    case FLEXSN_STATE_SEQUENCE:
    case FLEXSN_OPTIONAL_INPUT_SEQUENCE:
    case FLEXSN_SAVED_OUTPUT:
    case FLEXSN_SAVED_INPUT:
    case FLEXSN_PARAM_GRADIENT:
    case FLEXSN_REDUCTION_SCRATCH:
    case FLEXSN_PER_NEURON_PARAM:
    case FLEXSN_PER_NEURON_PARAM_GRADIENT:
    case FLEXSN_PER_CHANNEL_PARAM:
    case FLEXSN_PER_CHANNEL_PARAM_GRADIENT:
    case FLEXSN_COUPLING_WEIGHTS:
      break;
    default:
      return FLEXSN_ERROR_INVALID_ARGUMENT;
    }
    /* Bytes (1) and bits (FLEXSN_BIT_PACKED) hold the spikes of an output
       sequence only. */
    if (desc->element_sizes && desc->element_sizes[i] != 2 &&
        desc->element_sizes[i] != 4 &&
        !((desc->element_sizes[i] == 1 ||
           desc->element_sizes[i] == FLEXSN_BIT_PACKED) &&
          desc->kinds[i] == FLEXSN_OUTPUT_SEQUENCE))
      return FLEXSN_ERROR_INVALID_ARGUMENT;
  }
  /* Every final state needs an initial state to take its value for T == 0. */
  if (finals > initials || count_kind(desc, FLEXSN_REDUCTION_SCRATCH) > 1 ||
      count_kind(desc, FLEXSN_COUPLING_WEIGHTS) > 1)
    return FLEXSN_ERROR_INVALID_ARGUMENT;
  if (desc->num_scalars > 0 && !scalars)
    return FLEXSN_ERROR_INVALID_ARGUMENT;
  for (i = 0; i < desc->num_scalars; ++i)
    if (!scalars[i])
      return FLEXSN_ERROR_INVALID_ARGUMENT;
  return FLEXSN_SUCCESS;
}

/* Computes the byte extents of a [T, N] and an [N] buffer, 0 when empty. */
static flexsn_status compute_extents(int64_t T, int64_t N, int64_t ld,
                                     int64_t element_size, int64_t *seq_bytes,
                                     int64_t *state_bytes) {
  int64_t seq = 0;
  if (N > INT64_MAX / element_size)
    return FLEXSN_ERROR_SIZE_OVERFLOW;
  *state_bytes = N * element_size;
  if (T > 0 && N > 0) {
    /* (T-1)*ld + N, with ld >= N > 0. */
    if (T - 1 > (INT64_MAX - N) / ld)
      return FLEXSN_ERROR_SIZE_OVERFLOW;
    seq = (T - 1) * ld + N;
    if (seq > INT64_MAX / element_size)
      return FLEXSN_ERROR_SIZE_OVERFLOW;
  }
  *seq_bytes = seq * element_size;
  /* The scalar kernel needs ceil(N / 256) blocks on grid x. */
  if (N > 0 && (N - 1) / 256 + 1 > INT32_MAX)
    return FLEXSN_ERROR_SIZE_OVERFLOW;
  return FLEXSN_SUCCESS;
}

/* The first non-NULL buffer of a call (NULL if none). */
static const void *first_buffer(const flexsn_kernel_desc *desc,
                                void *const *buffers) {
  int i;
  for (i = 0; i < desc->num_buffers; ++i)
    if (buffers[i])
      return buffers[i];
  return NULL;
}

/*===----------------------------------------------------------------------===//
 * Launch
 *===----------------------------------------------------------------------===*/

/* The index of the k-th initial state's buffer. */
static int initial_state(const flexsn_kernel_desc *desc, int k) {
  int i;
  for (i = 0; i < desc->num_buffers; ++i)
    if (desc->kinds[i] == FLEXSN_INITIAL_STATE && k-- == 0)
      return i;
  return -1; /* unreachable: check_desc counted them */
}

/* T == 0: the k-th final state takes the k-th initial state (or zeros):
   N elements of the final state's size. */
static flexsn_status copy_initial_to_final(const flexsn_backend *backend,
                                           const flexsn_kernel_desc *desc,
                                           flexsn_stream stream, int64_t N,
                                           void *const *buffers) {
  void *context;
  flexsn_status status;
  int i, k, any = 0;
  for (i = 0; i < desc->num_buffers; ++i)
    any |= desc->kinds[i] == FLEXSN_FINAL_STATE && buffers[i] != NULL;
  if (!any)
    return FLEXSN_SUCCESS; /* nothing to write: no device needed */
  status = backend->enter(stream, first_buffer(desc, buffers), &context);
  if (status != FLEXSN_SUCCESS)
    return status;

  /* Validate every buffer involved before writing any. */
  for (i = 0, k = 0; i < desc->num_buffers; ++i) {
    int src;
    int64_t bytes = N * element_size_of(desc, i);
    if (desc->kinds[i] != FLEXSN_FINAL_STATE)
      continue;
    src = initial_state(desc, k++);
    if (!buffers[i])
      continue;
    status = backend->check_buffer(context, buffers[i], bytes, 1);
    if (status != FLEXSN_SUCCESS)
      return blame(i, status);
    if (buffers[src]) {
      status = backend->check_buffer(context, buffers[src], bytes, 0);
      if (status != FLEXSN_SUCCESS)
        return blame(src, status);
    }
  }
  for (i = 0, k = 0; i < desc->num_buffers; ++i) {
    void *dst = buffers[i], *src;
    size_t bytes = (size_t)(N * element_size_of(desc, i));
    if (desc->kinds[i] != FLEXSN_FINAL_STATE)
      continue;
    src = buffers[initial_state(desc, k++)];
    if (!dst || src == dst) /* absent, or in-place: nothing to do */
      continue;
    status = src ? backend->copy(dst, src, bytes, stream)
                 : backend->zero(dst, bytes, stream);
    if (status != FLEXSN_SUCCESS)
      return status;
  }
  return FLEXSN_SUCCESS;
}

/* Validates and zeroes every buffer of a kind `bytes_of` gives a size
   (negative: not of it) to. */
static flexsn_status
zero_buffers(const flexsn_backend *backend, void *context,
             const flexsn_kernel_desc *desc, flexsn_stream stream, int64_t size,
             int64_t (*bytes_of)(const flexsn_kernel_desc *, int, int64_t),
             void *const *buffers) {
  int i;
  for (i = 0; i < desc->num_buffers; ++i) {
    flexsn_status status;
    int64_t bytes = bytes_of(desc, i, size);
    if (bytes < 0)
      continue;
    status = backend->check_buffer(context, buffers[i], bytes, 1);
    if (status != FLEXSN_SUCCESS)
      return blame(i, status);
    status = backend->zero(buffers[i], (size_t)bytes, stream);
    if (status != FLEXSN_SUCCESS)
      return status;
  }
  return FLEXSN_SUCCESS;
}

/* The gradients a kernel accumulates with atomics: scalar ones (one float)
   and per-channel ones (C floats). */
static int64_t param_gradient_bytes(const flexsn_kernel_desc *desc, int i,
                                    int64_t C) {
  if (desc->kinds[i] == FLEXSN_PARAM_GRADIENT)
    return 4;
  if (desc->kinds[i] == FLEXSN_PER_CHANNEL_PARAM_GRADIENT)
    return 4 * C;
  return -1;
}

/* T == 0: the per-neuron parameter gradients (the kernel, which would write
   them, does not run). */
static int64_t per_neuron_gradient_bytes(const flexsn_kernel_desc *desc, int i,
                                         int64_t N) {
  if (desc->kinds[i] != FLEXSN_PER_NEURON_PARAM_GRADIENT)
    return -1;
  return N * element_size_of(desc, i);
}

/* The launches: C, S for per-channel kernels; `coupled_launch` with H for
   coupled ones (flexsn_launch_coupled), which no other kernel takes. */
static flexsn_status launch(flexsn_image *image, const flexsn_kernel_desc *desc,
                            flexsn_stream stream, int64_t T, int64_t N,
                            int64_t ld, int64_t C, int64_t S,
                            int coupled_launch, int64_t H, void *const *buffers,
                            const void *const *scalars) {
  void *pointers[FLEXSN_MAX_KERNEL_ARGS];
  int64_t extents[FLEXSN_MAX_KERNEL_ARGS];
  void *params[FLEXSN_MAX_KERNEL_ARGS + 5];
  int64_t sizes[5], seq_bytes = 0, state_bytes = 0, per_block;
  int i, nb, vector, channels, coupled, num_sizes;
  const flexsn_backend *backend;
  void *context, *function;
  flexsn_status status;

  /* Everything that needs no device comes first, so it also fails cleanly
     on machines without one. */
  g_failed_buffer = -1;
  status = check_desc(image, desc, buffers, scalars);
  if (status != FLEXSN_SUCCESS)
    return status;
  backend = backend_of(image);
  nb = desc->num_buffers;
  if (T < 0 || N < 0)
    return FLEXSN_ERROR_NEGATIVE_SIZE;
  if (ld < 0 || (ld != 0 && ld < N))
    return FLEXSN_ERROR_BAD_STRIDE;
  if (ld == 0)
    ld = N;
  /* Per-channel kernels see the neurons as [B, C, S]; C fits the kernel's
     i32 warp shuffles. */
  channels = 0;
  for (i = 0; i < nb; ++i)
    channels |= is_per_channel(desc->kinds[i]);
  if (channels && (C < 1 || S < 1 || C > INT32_MAX || S > INT64_MAX / C ||
                   N % (C * S) != 0))
    return FLEXSN_ERROR_BAD_CHANNELS;
  /* Coupled kernels run a block per sample of H neurons. */
  coupled = count_kind(desc, FLEXSN_COUPLING_WEIGHTS) > 0;
  if (coupled != coupled_launch ||
      (coupled && (H < 1 || H > 256 * (int64_t)desc->vector_width ||
                   N % H != 0 || N / H > INT32_MAX)))
    return FLEXSN_ERROR_BAD_COUPLING;
  for (i = 0; i < nb; ++i)
    if (is_required(desc->kinds[i]) && !buffers[i])
      return blame(i, FLEXSN_ERROR_NULL_POINTER);
  /* Extents in elements, then in bytes per buffer (element sizes differ in
     training kernels). */
  status = compute_extents(T, N, ld, 1, &seq_bytes, &state_bytes);
  if (status != FLEXSN_SUCCESS)
    return status;
  for (i = 0; i < nb; ++i) {
    int64_t size = element_size_of(desc, i);
    int64_t count = is_sequence(desc->kinds[i]) ? seq_bytes : state_bytes;
    if (size == FLEXSN_BIT_PACKED) {
      /* Rows of ceil(ld / 8) bytes; the last holds ceil(N / 8). No
         overflow: (T-1)*ld + N fits (ld + 7 might not). */
      extents[i] =
          count ? (T - 1) * (ld / 8 + (ld % 8 != 0)) + (N / 8 + (N % 8 != 0))
                : 0;
      continue;
    }
    if (count > INT64_MAX / size)
      return FLEXSN_ERROR_SIZE_OVERFLOW;
    extents[i] = count * size;
    if (desc->kinds[i] == FLEXSN_PARAM_GRADIENT)
      extents[i] = 4;
    if (is_per_channel(desc->kinds[i]))
      extents[i] = 4 * C;
    if (desc->kinds[i] == FLEXSN_COUPLING_WEIGHTS)
      extents[i] = 4 * H * H; /* H <= 256 * vector_width: no overflow */
    /* Bounded by 4 + 4 * 128 * 2^31 (compute_extents checked the grid). */
    if (desc->kinds[i] == FLEXSN_REDUCTION_SCRATCH)
      extents[i] = 4 + 4 * (int64_t)count_kind(desc, FLEXSN_PARAM_GRADIENT) *
                           ((N + 255) / 256);
  }
  for (i = 0; i < nb; ++i)
    if (element_size_of(desc, i) != FLEXSN_BIT_PACKED &&
        (uintptr_t)buffers[i] % (uintptr_t)element_size_of(desc, i) != 0)
      return blame(i, FLEXSN_ERROR_INVALID_ARGUMENT);

  if (N == 0 || T == 0) {
    /* Parameter gradients of an empty problem are zero. */
    int any = 0;
    for (i = 0; i < nb; ++i)
      any |= desc->kinds[i] == FLEXSN_PARAM_GRADIENT ||
             desc->kinds[i] == FLEXSN_PER_CHANNEL_PARAM_GRADIENT ||
             (N > 0 && desc->kinds[i] == FLEXSN_PER_NEURON_PARAM_GRADIENT);
    if (any) {
      status = backend->enter(stream, first_buffer(desc, buffers), &context);
      if (status == FLEXSN_SUCCESS)
        status = zero_buffers(backend, context, desc, stream, C,
                              param_gradient_bytes, buffers);
      if (status == FLEXSN_SUCCESS && N > 0)
        status = zero_buffers(backend, context, desc, stream, N,
                              per_neuron_gradient_bytes, buffers);
      if (status != FLEXSN_SUCCESS)
        return status;
    }
    if (N == 0)
      return FLEXSN_SUCCESS;
    return copy_initial_to_final(backend, desc, stream, N, buffers);
  }

  status = backend->enter(stream, first_buffer(desc, buffers), &context);
  if (status != FLEXSN_SUCCESS)
    return status;
  for (i = 0; i < nb; ++i) {
    if (!buffers[i])
      continue;
    status = backend->check_buffer(context, buffers[i], extents[i],
                                   is_written(desc->kinds[i]));
    if (status != FLEXSN_SUCCESS)
      return blame(i, status);
  }

  vector = coupled ? H > 256 : ld % desc->vector_width == 0;
  for (i = 0; i < nb && !coupled; ++i) {
    /* A vector thread stores vector_width / 8 bytes of bits. */
    uintptr_t alignment = element_size_of(desc, i) == FLEXSN_BIT_PACKED
                              ? (uintptr_t)(desc->vector_width / 8)
                              : 16;
    vector &= is_scalar_access(desc->kinds[i]) || alignment <= 1 ||
              (uintptr_t)buffers[i] % alignment == 0;
  }
  status = backend->get_function(
      image, context, vector ? desc->vector_kernel : desc->scalar_kernel,
      &function);
  if (status != FLEXSN_SUCCESS)
    return status;

  /* Parameter gradients accumulate with atomics: zero them first; the
     deterministic mode's ticket counter starts at zero too. */
  status = zero_buffers(backend, context, desc, stream, C, param_gradient_bytes,
                        buffers);
  if (status != FLEXSN_SUCCESS)
    return status;
  for (i = 0; i < nb; ++i) {
    if (desc->kinds[i] != FLEXSN_REDUCTION_SCRATCH)
      continue;
    status = backend->zero(buffers[i], 4, stream);
    if (status != FLEXSN_SUCCESS)
      return status;
  }
  for (i = 0; i < nb; ++i) {
    pointers[i] = buffers[i];
    params[i] = &pointers[i];
  }
  sizes[0] = T;
  sizes[1] = N;
  sizes[2] = ld;
  sizes[3] = coupled ? H : C;
  sizes[4] = S;
  num_sizes = channels ? 5 : coupled ? 4 : 3;
  for (i = 0; i < num_sizes; ++i)
    params[nb + i] = &sizes[i];
  for (i = 0; i < desc->num_scalars; ++i)
    params[nb + num_sizes + i] = (void *)(uintptr_t)scalars[i]; /* only read */

  /* ceil(N / (width * 256)) <= ceil(N / 256) fits grid x; N / H, checked. */
  per_block = coupled ? H
                      : FLEXSN_BLOCK_THREADS *
                            (int64_t)(vector ? desc->vector_width : 1);
  return backend->launch(function, (unsigned int)((N - 1) / per_block + 1),
                         stream, params);
}

flexsn_status flexsn_launch(flexsn_image *image, const flexsn_kernel_desc *desc,
                            flexsn_stream stream, int64_t T, int64_t N,
                            int64_t ld, void *const *buffers,
                            const void *const *scalars) {
  return launch(image, desc, stream, T, N, ld, 0, 0, 0, 0, buffers, scalars);
}

flexsn_status flexsn_launch_channels(flexsn_image *image,
                                     const flexsn_kernel_desc *desc,
                                     flexsn_stream stream, int64_t T, int64_t N,
                                     int64_t ld, int64_t C, int64_t S,
                                     void *const *buffers,
                                     const void *const *scalars) {
  return launch(image, desc, stream, T, N, ld, C, S, 0, 0, buffers, scalars);
}

flexsn_status flexsn_launch_coupled(flexsn_image *image,
                                    const flexsn_kernel_desc *desc,
                                    flexsn_stream stream, int64_t T, int64_t N,
                                    int64_t ld, int64_t H, void *const *buffers,
                                    const void *const *scalars) {
  return launch(image, desc, stream, T, N, ld, 0, 0, 1, H, buffers, scalars);
}
