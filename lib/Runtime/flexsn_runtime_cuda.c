/*===- flexsn_runtime_cuda.c - The runtime's CUDA backend ----------------===//
 *
 * Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
 *
 *===----------------------------------------------------------------------===//
 *
 * The CUDA driver's part of a launch (flexsn_backend.h): lazy per-context
 * module loading, buffer and context checks, copies, zeroing and the launch
 * itself.
 *
 * The driver is reached only through function pointers resolved with dlsym
 * from libcuda.so.1, so nothing here links against CUDA or includes cuda.h
 * (flexsn_cuda_driver.h declares what is used): programs start on machines
 * without a driver, and every argument check that needs no driver runs (and
 * fails cleanly) there.
 *
 *===----------------------------------------------------------------------===*/

#define _POSIX_C_SOURCE 200809L /* pthread, dlopen under -std=c99 */

#include "flexsn_backend.h"
#include "flexsn_cuda_driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/*===----------------------------------------------------------------------===//
 * Last driver error, per thread
 *===----------------------------------------------------------------------===*/

static FLEXSN_THREAD_LOCAL int g_last_error;

int flexsn_last_cuda_error(void) { return g_last_error; }

/* Records a failed driver call and returns the status to report for it. */
static flexsn_status fail(flexsn_cu_result result, flexsn_status status) {
  g_last_error = (int)result;
  return status;
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

static flexsn_status cuda_get_function(flexsn_image *image, void *context,
                                       const char *name, void **function) {
  unsigned long long context_id;
  image_state *state;
  flexsn_status status;
  flexsn_cu_result r =
      g_drv.ctx_get_id((flexsn_cu_context)context, &context_id);
  if (r != FLEXSN_CUDA_SUCCESS)
    return fail(r, FLEXSN_ERROR_CUDA);
  state = get_state(image);
  if (!state)
    return fail(FLEXSN_CUDA_ERROR_OUT_OF_MEMORY, FLEXSN_ERROR_CUDA);
  pthread_mutex_lock(&state->lock);
  status = lookup_function(image, state, (flexsn_cu_context)context, context_id,
                           name, (flexsn_cu_function *)function);
  pthread_mutex_unlock(&state->lock);
  return status;
}

static flexsn_status cuda_unload(flexsn_image *image) {
  flexsn_status status = FLEXSN_SUCCESS;
  image_state *state;
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
 * Buffers and contexts
 *===----------------------------------------------------------------------===*/

/* Checks that `p` is usable by kernels in `context` for `bytes` bytes. */
static flexsn_status cuda_check_buffer(void *context, const void *p,
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
  } else if (owner == (flexsn_cu_context)context) {
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

/* The current context (adopting the primary context of `buffer`'s device if
   none is current), and the stream's context agreeing with it. */
static flexsn_status cuda_enter(flexsn_stream stream, const void *buffer,
                                void **current) {
  flexsn_status status = get_driver();
  flexsn_cu_context context = NULL;
  flexsn_cu_result r;
  if (status != FLEXSN_SUCCESS)
    return status;
  r = g_drv.ctx_get_current(&context);
  if (r != FLEXSN_CUDA_SUCCESS)
    return fail(r, FLEXSN_ERROR_CUDA);
  if (!context)
    adopt_primary_context(buffer, &context);
  if (!context)
    return FLEXSN_ERROR_NO_CONTEXT;
  if (stream) {
    flexsn_cu_context stream_context = NULL;
    r = g_drv.stream_get_ctx(stream, &stream_context);
    if (r != FLEXSN_CUDA_SUCCESS)
      return fail(r, FLEXSN_ERROR_CUDA);
    if (stream_context != context)
      return FLEXSN_ERROR_CONTEXT_MISMATCH;
  }
  *current = context;
  return FLEXSN_SUCCESS;
}

/*===----------------------------------------------------------------------===//
 * Copies, zeroing, launches
 *===----------------------------------------------------------------------===*/

static flexsn_status cuda_copy(void *dst, const void *src, size_t bytes,
                               flexsn_stream stream) {
  flexsn_cu_result r = g_drv.memcpy_dtod_async(
      (flexsn_cu_deviceptr)(uintptr_t)dst, (flexsn_cu_deviceptr)(uintptr_t)src,
      bytes, stream);
  return r == FLEXSN_CUDA_SUCCESS ? FLEXSN_SUCCESS : fail(r, FLEXSN_ERROR_CUDA);
}

static flexsn_status cuda_zero(void *dst, size_t bytes, flexsn_stream stream) {
  flexsn_cu_result r = g_drv.memset_d8_async(
      (flexsn_cu_deviceptr)(uintptr_t)dst, 0, bytes, stream);
  return r == FLEXSN_CUDA_SUCCESS ? FLEXSN_SUCCESS : fail(r, FLEXSN_ERROR_CUDA);
}

static flexsn_status cuda_launch(void *function, unsigned int blocks,
                                 flexsn_stream stream, void **params) {
  flexsn_cu_result r =
      g_drv.launch_kernel((flexsn_cu_function)function, blocks, 1, 1,
                          FLEXSN_BLOCK_THREADS, 1, 1, 0, stream, params, NULL);
  return r == FLEXSN_CUDA_SUCCESS ? FLEXSN_SUCCESS
                                  : fail(r, FLEXSN_ERROR_LAUNCH);
}

/* Every image: cuModuleLoadData tells cubins, fatbins and PTX apart, and
   reports anything else as FLEXSN_ERROR_MODULE_LOAD. */
static int cuda_accepts(const flexsn_image *image) {
  (void)image;
  return 1;
}

const flexsn_backend flexsn_cuda_backend = {
    "cuda",    cuda_accepts, cuda_enter,  cuda_check_buffer, cuda_get_function,
    cuda_copy, cuda_zero,    cuda_launch, cuda_unload};
