/*===- flexsn_runtime.c - FlexSN kernel launch runtime -------------------===//
 *
 * Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
 *
 *===----------------------------------------------------------------------===//
 *
 * Validation, lazy per-context module loading and kernel launch for the
 * generated host stubs. See include/flexsn/Runtime/flexsn_runtime.h.
 *
 * The driver is reached only through function pointers resolved with dlsym
 * from libcuda.so.1, so nothing here links against CUDA or includes cuda.h
 * (flexsn_cuda_driver.h declares what is used): programs start on machines
 * without a driver, and every argument check that needs no driver runs (and
 * fails cleanly) there.
 *
 *===----------------------------------------------------------------------===*/

#define _POSIX_C_SOURCE 200809L /* pthread, dlopen under -std=c99 */

#include "flexsn_runtime.h"
#include "flexsn_cuda_driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/*===----------------------------------------------------------------------===//
 * Last driver error, per thread
 *===----------------------------------------------------------------------===*/

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define FLEXSN_THREAD_LOCAL _Thread_local
#else
#define FLEXSN_THREAD_LOCAL __thread /* GCC, Clang: dlopen makes us POSIX */
#endif

static FLEXSN_THREAD_LOCAL int g_last_error;
/* The buffer a failed flexsn_launch on this thread blamed; -1 for none. */
static FLEXSN_THREAD_LOCAL int g_failed_buffer = -1;

int flexsn_last_cuda_error(void) { return g_last_error; }

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

/* Records a failed driver call and returns the status to report for it. */
static flexsn_status fail(flexsn_cu_result result, flexsn_status status) {
  g_last_error = (int)result;
  return status;
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
 * Driver entry points
 *===----------------------------------------------------------------------===*/

/* cuda.h maps API names to versioned symbols with macros (cuMemcpyDtoDAsync ->
   cuMemcpyDtoDAsync_v2, ...); dlsym needs the real symbol names, so they are
   spelled out below, with the signatures of the versions named. The
   non-per-thread-default-stream variants are used: callers choose
   CU_STREAM_PER_THREAD explicitly if they want it. */
typedef struct driver {
  flexsn_cu_result (*init)(unsigned int);
  flexsn_cu_result (*ctx_get_current)(flexsn_cu_context *);
  flexsn_cu_result (*ctx_get_id)(flexsn_cu_context, unsigned long long *);
  flexsn_cu_result (*ctx_push_current)(flexsn_cu_context);
  flexsn_cu_result (*ctx_pop_current)(flexsn_cu_context *);
  flexsn_cu_result (*ctx_set_current)(flexsn_cu_context);
  flexsn_cu_result (*device_get)(flexsn_cu_device *, int);
  flexsn_cu_result (*primary_ctx_get_state)(flexsn_cu_device, unsigned int *,
                                            int *);
  flexsn_cu_result (*primary_ctx_retain)(flexsn_cu_context *, flexsn_cu_device);
  flexsn_cu_result (*primary_ctx_release)(flexsn_cu_device);
  flexsn_cu_result (*stream_get_ctx)(flexsn_stream, flexsn_cu_context *);
  flexsn_cu_result (*pointer_get_attribute)(void *, flexsn_cu_pointer_attribute,
                                            flexsn_cu_deviceptr);
  flexsn_cu_result (*pointer_get_attributes)(unsigned int,
                                             flexsn_cu_pointer_attribute *,
                                             void **, flexsn_cu_deviceptr);
  flexsn_cu_result (*module_load_data)(flexsn_cu_module *, const void *);
  flexsn_cu_result (*module_get_function)(flexsn_cu_function *,
                                          flexsn_cu_module, const char *);
  flexsn_cu_result (*module_unload)(flexsn_cu_module);
  flexsn_cu_result (*launch_kernel)(flexsn_cu_function, unsigned int,
                                    unsigned int, unsigned int, unsigned int,
                                    unsigned int, unsigned int, unsigned int,
                                    flexsn_stream, void **, void **);
  flexsn_cu_result (*memcpy_dtod_async)(flexsn_cu_deviceptr,
                                        flexsn_cu_deviceptr, size_t,
                                        flexsn_stream);
  flexsn_cu_result (*memset_d8_async)(flexsn_cu_deviceptr, unsigned char,
                                      size_t, flexsn_stream);
} driver;

static const struct {
  const char *name;
  size_t offset;
} k_symbols[] = {
    {"cuInit", offsetof(driver, init)},
    {"cuCtxGetCurrent", offsetof(driver, ctx_get_current)},
    {"cuCtxGetId", offsetof(driver, ctx_get_id)}, /* driver >= 12.0 */
    {"cuCtxPushCurrent_v2", offsetof(driver, ctx_push_current)},
    {"cuCtxPopCurrent_v2", offsetof(driver, ctx_pop_current)},
    {"cuCtxSetCurrent", offsetof(driver, ctx_set_current)},
    {"cuDeviceGet", offsetof(driver, device_get)},
    {"cuDevicePrimaryCtxGetState", offsetof(driver, primary_ctx_get_state)},
    {"cuDevicePrimaryCtxRetain", offsetof(driver, primary_ctx_retain)},
    {"cuDevicePrimaryCtxRelease_v2", offsetof(driver, primary_ctx_release)},
    {"cuStreamGetCtx", offsetof(driver, stream_get_ctx)},
    {"cuPointerGetAttribute", offsetof(driver, pointer_get_attribute)},
    {"cuPointerGetAttributes", offsetof(driver, pointer_get_attributes)},
    {"cuModuleLoadData", offsetof(driver, module_load_data)},
    {"cuModuleGetFunction", offsetof(driver, module_get_function)},
    {"cuModuleUnload", offsetof(driver, module_unload)},
    {"cuLaunchKernel", offsetof(driver, launch_kernel)},
    {"cuMemcpyDtoDAsync_v2", offsetof(driver, memcpy_dtod_async)},
    {"cuMemsetD8Async", offsetof(driver, memset_d8_async)},
};

static driver g_drv;
static pthread_once_t g_drv_once = PTHREAD_ONCE_INIT;
static flexsn_status g_drv_status = FLEXSN_ERROR_NO_DRIVER;
static flexsn_cu_result g_drv_init_result = FLEXSN_CUDA_SUCCESS;

static void load_driver(void) {
  /* Never dlclose'd: modules and function handles outlive any one call. */
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  size_t i;
  if (!lib)
    return;
  for (i = 0; i < sizeof k_symbols / sizeof k_symbols[0]; ++i) {
    void *sym = dlsym(lib, k_symbols[i].name);
    if (!sym)
      return;
    /* ISO C has no object-to-function pointer conversion; POSIX guarantees
       the representations match, so copy the bytes. */
    memcpy((char *)&g_drv + k_symbols[i].offset, &sym, sizeof sym);
  }
  g_drv_init_result = g_drv.init(0);
  if (g_drv_init_result == FLEXSN_CUDA_SUCCESS)
    g_drv_status = FLEXSN_SUCCESS;
}

/* Loads the driver and calls cuInit(0), once per process. */
static flexsn_status get_driver(void) {
  pthread_once(&g_drv_once, load_driver);
  if (g_drv_status != FLEXSN_SUCCESS &&
      g_drv_init_result != FLEXSN_CUDA_SUCCESS)
    g_last_error = (int)g_drv_init_result;
  return g_drv_status;
}

/*===----------------------------------------------------------------------===//
 * Per-image, per-context module cache
 *===----------------------------------------------------------------------===*/

typedef struct function_entry {
  struct function_entry *next;
  flexsn_cu_function function;
  char *name; /* the entry name, stored right after the entry (one
                allocation; no flexible array member, which C++ lacks) */
} function_entry;

/* Keyed by the context's unique id, not its handle: a destroyed context's
   handle may be reused by a new context, whose module must be loaded anew. */
typedef struct context_entry {
  struct context_entry *next;
  flexsn_cu_context context;
  unsigned long long context_id;
  flexsn_cu_module module;
  function_entry *functions;
} context_entry;

typedef struct image_state {
  pthread_mutex_t lock; /* guards `contexts`; held while loading a module */
  context_entry *contexts;
} image_state;

/* Guards every image's `state` pointer (creation and unload). Held only for
   the pointer itself, so slow module loads of one image do not block
   launches of another. */
static pthread_mutex_t g_state_lock = PTHREAD_MUTEX_INITIALIZER;

static image_state *get_state(flexsn_image *image) {
  image_state *state;
  pthread_mutex_lock(&g_state_lock);
  state = (image_state *)image->state;
  if (!state) {
    state = (image_state *)calloc(1, sizeof *state);
    if (state && pthread_mutex_init(&state->lock, NULL) != 0) {
      free(state);
      state = NULL;
    }
    image->state = state;
  }
  pthread_mutex_unlock(&g_state_lock);
  return state;
}

static void free_context_entry(context_entry *entry) {
  while (entry->functions) {
    function_entry *next = entry->functions->next;
    free(entry->functions);
    entry->functions = next;
  }
  free(entry);
}

/* Finds (or loads) the image's module in the current context, then the named
   function in it. Called with the image state's lock held. */
static flexsn_status lookup_function(flexsn_image *image, image_state *state,
                                     flexsn_cu_context context,
                                     unsigned long long context_id,
                                     const char *name,
                                     flexsn_cu_function *function) {
  context_entry **link = &state->contexts, *entry = NULL;
  function_entry *fn;
  size_t name_size;
  flexsn_cu_result r;

  while (*link) {
    context_entry *e = *link;
    if (e->context_id == context_id) {
      entry = e;
      break;
    }
    if (e->context == context) {
      /* Same handle, other id: that context was destroyed, and its module
         with it. Drop the entry without unloading. */
      *link = e->next;
      free_context_entry(e);
      continue;
    }
    link = &e->next;
  }

  if (!entry) {
    flexsn_cu_module module;
    r = g_drv.module_load_data(&module, image->data);
    if (r != FLEXSN_CUDA_SUCCESS)
      return fail(r, FLEXSN_ERROR_MODULE_LOAD);
    entry = (context_entry *)calloc(1, sizeof *entry);
    if (!entry) {
      g_drv.module_unload(module);
      return fail(FLEXSN_CUDA_ERROR_OUT_OF_MEMORY, FLEXSN_ERROR_CUDA);
    }
    entry->context = context;
    entry->context_id = context_id;
    entry->module = module;
    entry->next = state->contexts;
    state->contexts = entry;
  }

  for (fn = entry->functions; fn; fn = fn->next) {
    if (strcmp(fn->name, name) == 0) {
      *function = fn->function;
      return FLEXSN_SUCCESS;
    }
  }
  r = g_drv.module_get_function(function, entry->module, name);
  if (r == FLEXSN_CUDA_ERROR_NOT_FOUND)
    return fail(r, FLEXSN_ERROR_KERNEL_NOT_FOUND);
  if (r != FLEXSN_CUDA_SUCCESS)
    return fail(r, FLEXSN_ERROR_CUDA);
  /* Caching is an optimization: without memory, just skip it. */
  name_size = strlen(name) + 1;
  fn = (function_entry *)malloc(sizeof *fn + name_size);
  if (fn) {
    fn->function = *function;
    fn->name = (char *)(fn + 1);
    memcpy(fn->name, name, name_size);
    fn->next = entry->functions;
    entry->functions = fn;
  }
  return FLEXSN_SUCCESS;
}

static flexsn_status get_function(flexsn_image *image,
                                  flexsn_cu_context context, const char *name,
                                  flexsn_cu_function *function) {
  unsigned long long context_id;
  image_state *state;
  flexsn_status status;
  flexsn_cu_result r = g_drv.ctx_get_id(context, &context_id);
  if (r != FLEXSN_CUDA_SUCCESS)
    return fail(r, FLEXSN_ERROR_CUDA);
  state = get_state(image);
  if (!state)
    return fail(FLEXSN_CUDA_ERROR_OUT_OF_MEMORY, FLEXSN_ERROR_CUDA);
  pthread_mutex_lock(&state->lock);
  status = lookup_function(image, state, context, context_id, name, function);
  pthread_mutex_unlock(&state->lock);
  return status;
}

flexsn_status flexsn_image_unload(flexsn_image *image) {
  flexsn_status status = FLEXSN_SUCCESS;
  image_state *state;
  if (!image)
    return FLEXSN_ERROR_INVALID_ARGUMENT;
  /* Detach the state first: a second (or racing) unload then sees none. */
  pthread_mutex_lock(&g_state_lock);
  state = (image_state *)image->state;
  image->state = NULL;
  pthread_mutex_unlock(&g_state_lock);
  if (!state)
    return FLEXSN_SUCCESS;

  /* Entries exist only after the driver was loaded. */
  while (state->contexts) {
    context_entry *entry = state->contexts;
    unsigned long long id;
    state->contexts = entry->next;
    /* A destroyed context reports an error or, if its handle was reused,
       another id; its module is already gone. */
    if (g_drv.ctx_get_id(entry->context, &id) == FLEXSN_CUDA_SUCCESS &&
        id == entry->context_id) {
      flexsn_cu_context popped;
      flexsn_cu_result r = g_drv.ctx_push_current(entry->context);
      if (r == FLEXSN_CUDA_SUCCESS) {
        r = g_drv.module_unload(entry->module);
        g_drv.ctx_pop_current(&popped);
      }
      if (r != FLEXSN_CUDA_SUCCESS)
        status = fail(r, FLEXSN_ERROR_CUDA);
    }
    free_context_entry(entry);
  }
  pthread_mutex_destroy(&state->lock);
  free(state);
  return status;
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

/* Checks that `p` is usable by kernels in `context` for `bytes` bytes. */
static flexsn_status check_buffer(flexsn_cu_context context, const void *p,
                                  int64_t bytes, int written) {
  flexsn_cu_deviceptr ptr = (flexsn_cu_deviceptr)(uintptr_t)p;
  flexsn_cu_context owner = NULL;
  unsigned int memory_type = 0, managed = 0;
  flexsn_cu_deviceptr start = 0;
  size_t size = 0;
  flexsn_cu_pointer_attribute attributes[] = {
      FLEXSN_CU_POINTER_ATTRIBUTE_CONTEXT,
      FLEXSN_CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
      FLEXSN_CU_POINTER_ATTRIBUTE_IS_MANAGED,
      FLEXSN_CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
      FLEXSN_CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void *values[] = {&owner, &memory_type, &managed, &start, &size};
  int accessible;
  /* Unknown (plain host) pointers get zeroed attributes, or INVALID_VALUE. */
  flexsn_cu_result r = g_drv.pointer_get_attributes(5, attributes, values, ptr);
  if (r == FLEXSN_CUDA_ERROR_INVALID_VALUE ||
      r == FLEXSN_CUDA_ERROR_INVALID_CONTEXT)
    return fail(r, FLEXSN_ERROR_CONTEXT_MISMATCH);
  if (r != FLEXSN_CUDA_SUCCESS)
    return fail(r, FLEXSN_ERROR_CUDA);

  if (managed) {
    accessible = 1;
  } else if (memory_type == FLEXSN_CU_MEMORYTYPE_HOST) {
    /* Pinned or registered host memory: kernels may use it only if it is
       mapped into this context at the same address (it may have a distinct
       device address, which the caller would have to pass instead). */
    flexsn_cu_deviceptr device = 0;
    accessible = g_drv.pointer_get_attribute(
                     &device, FLEXSN_CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                     ptr) == FLEXSN_CUDA_SUCCESS &&
                 device == ptr;
  } else if (owner == context) {
    accessible = memory_type == FLEXSN_CU_MEMORYTYPE_DEVICE;
  } else if (!owner && memory_type == FLEXSN_CU_MEMORYTYPE_DEVICE) {
    /* cuMemMap and memory-pool allocations belong to no context: ask what
       access the current context's device has. */
    unsigned long long flags = 0;
    accessible =
        g_drv.pointer_get_attribute(&flags,
                                    FLEXSN_CU_POINTER_ATTRIBUTE_ACCESS_FLAGS,
                                    ptr) == FLEXSN_CUDA_SUCCESS &&
        (flags == FLEXSN_CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE ||
         (!written && flags == FLEXSN_CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ));
  } else {
    accessible = 0; /* another context's device memory, or unknown */
  }
  if (!accessible)
    return FLEXSN_ERROR_CONTEXT_MISMATCH;

  if (ptr < start || ptr - start > size || size - (ptr - start) < (size_t)bytes)
    return FLEXSN_ERROR_BUFFER_TOO_SMALL;
  return FLEXSN_SUCCESS;
}

/* With no context current, makes current the primary context of the device
   `buffer` lives on, if its owner (the CUDA runtime, a framework) has
   activated it: what the CUDA runtime does on a thread's first call. Worker
   threads a framework starts (PyTorch's autograd threads) may not have made
   any context current yet. Never creates a context. */
static void adopt_primary_context(const void *buffer,
                                  flexsn_cu_context *context) {
  int ordinal = -1, active = 0;
  unsigned int flags = 0;
  flexsn_cu_device device;
  flexsn_cu_context primary = NULL;
  if (!buffer ||
      g_drv.pointer_get_attribute(
          &ordinal, FLEXSN_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
          (flexsn_cu_deviceptr)(uintptr_t)buffer) != FLEXSN_CUDA_SUCCESS ||
      ordinal < 0 ||
      g_drv.device_get(&device, ordinal) != FLEXSN_CUDA_SUCCESS ||
      g_drv.primary_ctx_get_state(device, &flags, &active) !=
          FLEXSN_CUDA_SUCCESS ||
      !active ||
      g_drv.primary_ctx_retain(&primary, device) != FLEXSN_CUDA_SUCCESS)
    return;
  if (g_drv.ctx_set_current(primary) == FLEXSN_CUDA_SUCCESS)
    *context = primary;
  /* The owner's retain keeps it alive. */
  g_drv.primary_ctx_release(device);
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

/* The current context (adopting the primary context of `buffer`'s device if
   none is current), and the stream's context agreeing with it. */
static flexsn_status check_context(flexsn_stream stream, const void *buffer,
                                   flexsn_cu_context *context) {
  flexsn_status status = get_driver();
  flexsn_cu_result r;
  if (status != FLEXSN_SUCCESS)
    return status;
  r = g_drv.ctx_get_current(context);
  if (r != FLEXSN_CUDA_SUCCESS)
    return fail(r, FLEXSN_ERROR_CUDA);
  if (!*context)
    adopt_primary_context(buffer, context);
  if (!*context)
    return FLEXSN_ERROR_NO_CONTEXT;
  if (stream) {
    flexsn_cu_context stream_context = NULL;
    r = g_drv.stream_get_ctx(stream, &stream_context);
    if (r != FLEXSN_CUDA_SUCCESS)
      return fail(r, FLEXSN_ERROR_CUDA);
    if (stream_context != *context)
      return FLEXSN_ERROR_CONTEXT_MISMATCH;
  }
  return FLEXSN_SUCCESS;
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
static flexsn_status copy_initial_to_final(const flexsn_kernel_desc *desc,
                                           flexsn_stream stream, int64_t N,
                                           void *const *buffers) {
  flexsn_cu_context context;
  flexsn_status status;
  int i, k, any = 0;
  for (i = 0; i < desc->num_buffers; ++i)
    any |= desc->kinds[i] == FLEXSN_FINAL_STATE && buffers[i] != NULL;
  if (!any)
    return FLEXSN_SUCCESS; /* nothing to write: no driver needed */
  status = check_context(stream, first_buffer(desc, buffers), &context);
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
    status = check_buffer(context, buffers[i], bytes, 1);
    if (status != FLEXSN_SUCCESS)
      return blame(i, status);
    if (buffers[src]) {
      status = check_buffer(context, buffers[src], bytes, 0);
      if (status != FLEXSN_SUCCESS)
        return blame(src, status);
    }
  }
  for (i = 0, k = 0; i < desc->num_buffers; ++i) {
    flexsn_cu_deviceptr dst = (flexsn_cu_deviceptr)(uintptr_t)buffers[i], src;
    size_t bytes = (size_t)(N * element_size_of(desc, i));
    flexsn_cu_result r;
    if (desc->kinds[i] != FLEXSN_FINAL_STATE)
      continue;
    src = (flexsn_cu_deviceptr)(uintptr_t)buffers[initial_state(desc, k++)];
    if (!dst || src == dst) /* absent, or in-place: nothing to do */
      continue;
    r = src ? g_drv.memcpy_dtod_async(dst, src, bytes, stream)
            : g_drv.memset_d8_async(dst, 0, bytes, stream);
    if (r != FLEXSN_CUDA_SUCCESS)
      return fail(r, FLEXSN_ERROR_CUDA);
  }
  return FLEXSN_SUCCESS;
}

/* Validates and zeroes every gradient that the kernel accumulates with
   atomics: scalar ones (one float) and per-channel ones (C floats). */
static flexsn_status zero_param_gradients(const flexsn_kernel_desc *desc,
                                          flexsn_cu_context context,
                                          flexsn_stream stream, int64_t C,
                                          void *const *buffers) {
  int i;
  for (i = 0; i < desc->num_buffers; ++i) {
    flexsn_status status;
    flexsn_cu_result r;
    int64_t bytes;
    if (desc->kinds[i] == FLEXSN_PARAM_GRADIENT)
      bytes = 4;
    else if (desc->kinds[i] == FLEXSN_PER_CHANNEL_PARAM_GRADIENT)
      bytes = 4 * C;
    else
      continue;
    status = check_buffer(context, buffers[i], bytes, 1);
    if (status != FLEXSN_SUCCESS)
      return blame(i, status);
    r = g_drv.memset_d8_async((flexsn_cu_deviceptr)(uintptr_t)buffers[i], 0,
                              (size_t)bytes, stream);
    if (r != FLEXSN_CUDA_SUCCESS)
      return fail(r, FLEXSN_ERROR_CUDA);
  }
  return FLEXSN_SUCCESS;
}

/* T == 0: validates and zeroes every per-neuron parameter gradient (the
   kernel, which would write them, does not run). */
static flexsn_status zero_per_neuron_gradients(const flexsn_kernel_desc *desc,
                                               flexsn_cu_context context,
                                               flexsn_stream stream, int64_t N,
                                               void *const *buffers) {
  int i;
  for (i = 0; i < desc->num_buffers; ++i) {
    flexsn_status status;
    flexsn_cu_result r;
    int64_t bytes = N * element_size_of(desc, i);
    if (desc->kinds[i] != FLEXSN_PER_NEURON_PARAM_GRADIENT)
      continue;
    status = check_buffer(context, buffers[i], bytes, 1);
    if (status != FLEXSN_SUCCESS)
      return blame(i, status);
    r = g_drv.memset_d8_async((flexsn_cu_deviceptr)(uintptr_t)buffers[i], 0,
                              (size_t)bytes, stream);
    if (r != FLEXSN_CUDA_SUCCESS)
      return fail(r, FLEXSN_ERROR_CUDA);
  }
  return FLEXSN_SUCCESS;
}

/* The launches: C, S for per-channel kernels; `coupled_launch` with H for
   coupled ones (flexsn_launch_coupled), which no other kernel takes. */
static flexsn_status launch(flexsn_image *image, const flexsn_kernel_desc *desc,
                            flexsn_stream stream, int64_t T, int64_t N,
                            int64_t ld, int64_t C, int64_t S,
                            int coupled_launch, int64_t H, void *const *buffers,
                            const void *const *scalars) {
  flexsn_cu_deviceptr pointers[FLEXSN_MAX_KERNEL_ARGS];
  int64_t extents[FLEXSN_MAX_KERNEL_ARGS];
  void *params[FLEXSN_MAX_KERNEL_ARGS + 5];
  int64_t sizes[5], seq_bytes = 0, state_bytes = 0, per_block;
  int i, nb, vector, channels, coupled, num_sizes;
  flexsn_cu_context context;
  flexsn_cu_function function;
  flexsn_status status;
  flexsn_cu_result r;

  /* Everything that needs no driver comes first, so it also fails cleanly on
     machines without one. */
  g_failed_buffer = -1;
  status = check_desc(image, desc, buffers, scalars);
  if (status != FLEXSN_SUCCESS)
    return status;
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
      status = check_context(stream, first_buffer(desc, buffers), &context);
      if (status == FLEXSN_SUCCESS)
        status = zero_param_gradients(desc, context, stream, C, buffers);
      if (status == FLEXSN_SUCCESS && N > 0)
        status = zero_per_neuron_gradients(desc, context, stream, N, buffers);
      if (status != FLEXSN_SUCCESS)
        return status;
    }
    if (N == 0)
      return FLEXSN_SUCCESS;
    return copy_initial_to_final(desc, stream, N, buffers);
  }

  status = check_context(stream, first_buffer(desc, buffers), &context);
  if (status != FLEXSN_SUCCESS)
    return status;
  for (i = 0; i < nb; ++i) {
    if (!buffers[i])
      continue;
    status = check_buffer(context, buffers[i], extents[i],
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
  status = get_function(image, context,
                        vector ? desc->vector_kernel : desc->scalar_kernel,
                        &function);
  if (status != FLEXSN_SUCCESS)
    return status;

  /* Parameter gradients accumulate with atomics: zero them first; the
     deterministic mode's ticket counter starts at zero too. */
  status = zero_param_gradients(desc, context, stream, C, buffers);
  if (status != FLEXSN_SUCCESS)
    return status;
  for (i = 0; i < nb; ++i) {
    if (desc->kinds[i] != FLEXSN_REDUCTION_SCRATCH)
      continue;
    r = g_drv.memset_d8_async((flexsn_cu_deviceptr)(uintptr_t)buffers[i], 0, 4,
                              stream);
    if (r != FLEXSN_CUDA_SUCCESS)
      return fail(r, FLEXSN_ERROR_CUDA);
  }
  for (i = 0; i < nb; ++i) {
    pointers[i] = (flexsn_cu_deviceptr)(uintptr_t)buffers[i];
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
  per_block = coupled ? H : 256 * (int64_t)(vector ? desc->vector_width : 1);
  r = g_drv.launch_kernel(function, (unsigned int)((N - 1) / per_block + 1), 1,
                          1, 256, 1, 1, 0, stream, params, NULL);
  if (r != FLEXSN_CUDA_SUCCESS)
    return fail(r, FLEXSN_ERROR_LAUNCH);
  return FLEXSN_SUCCESS;
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
