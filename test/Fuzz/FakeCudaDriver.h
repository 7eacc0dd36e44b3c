/*===- FakeCudaDriver.h - A CUDA driver stand-in for fuzzing ------*- C -*-===//
 *
 * Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
 *
 *===----------------------------------------------------------------------===//
 *
 * libcuda.so.1 for the runtime fuzz target: the driver entry points the
 * runtime resolves, over a model of three contexts on two devices, their
 * streams and allocations, so that every validation path of flexsn_launch
 * runs without a GPU. Nothing is ever dereferenced: allocations are address
 * ranges.
 *
 * The fake also watches the runtime: a write outside memory the runtime
 * validated, a launch or copy on another context's stream, a function of an
 * unloaded module, an unbalanced push/pop or retain/release are recorded as
 * violations (fake_cuda_violation).
 *
 *===----------------------------------------------------------------------===*/

#ifndef FLEXSN_TEST_FUZZ_FAKECUDADRIVER_H
#define FLEXSN_TEST_FUZZ_FAKECUDADRIVER_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { FAKE_CUDA_NUM_CONTEXTS = 3 }; /* 0, 1: primaries of devices 0, 1 */

typedef enum fake_cuda_memory {
  FAKE_CUDA_DEVICE,         /* cuMemAlloc in a context */
  FAKE_CUDA_MANAGED,        /* cuMemAllocManaged */
  FAKE_CUDA_HOST_MAPPED,    /* pinned host memory, same address on the device */
  FAKE_CUDA_HOST_ELSEWHERE, /* pinned host memory at another device address */
  FAKE_CUDA_POOL            /* cuMemMap / pool memory: no owning context */
} fake_cuda_memory;

/* Pool access flags per device, as CU_POINTER_ATTRIBUTE_ACCESS_FLAGS. */
typedef struct fake_cuda_allocation {
  fake_cuda_memory memory;
  int context;        /* FAKE_CUDA_DEVICE, MANAGED, HOST_*: owning context */
  unsigned access[2]; /* FAKE_CUDA_POOL: flags for devices 0 and 1 */
  uint64_t base, size;
} fake_cuda_allocation;

typedef struct fake_cuda_copy {
  uint64_t dst, src; /* src 0 for a memset */
  size_t bytes;
  unsigned char value; /* the memset's byte */
} fake_cuda_copy;

typedef void (*fake_cuda_launch_hook)(const char *kernel, unsigned grid_x,
                                      unsigned block_x, void **params);

/* Forgets the copies recorded and the launches counted. */
void fake_cuda_reset_records(void);

/* Forgets every allocation, stream, record and failure; contexts alive,
   none current, primaries active, modules of the last round unloaded. */
void fake_cuda_reset(void);

CUcontext fake_cuda_context(int index);
/* Makes context `index` the only one on the thread's stack (-1: none). */
void fake_cuda_set_current(int index);
/* The index of the current context (-1: none), and the stack's depth. */
int fake_cuda_current(void);
int fake_cuda_stack_depth(void);
/* Destroys context `index` and creates another with the same handle and a
   new id (what a driver may do): its modules are gone. */
void fake_cuda_recreate_context(int index);
void fake_cuda_set_primary_active(int device, int active);
int fake_cuda_context_device(int index);
/* A stream of context `index`. */
CUstream fake_cuda_stream(int index);
/* Adds an allocation; returns its base address (64-byte aligned, far from
   every other allocation). */
uint64_t fake_cuda_allocate(const fake_cuda_allocation *allocation);
const fake_cuda_allocation *fake_cuda_find(uint64_t address);
/* What cuPointerGetAttributes answers for an unknown address: an error
   (CUDA_ERROR_INVALID_VALUE) or zeroed attributes. */
void fake_cuda_set_unknown_pointer_error(int error);
/* cuModuleLoadData fails with CUDA_ERROR_INVALID_IMAGE when 0. */
void fake_cuda_set_image_loadable(int loadable);
/* The `n`-th driver call from now (0: the next) returns `result`; n < 0:
   none. Clears fake_cuda_failure_injected. */
void fake_cuda_fail_call(int n, CUresult result);
int fake_cuda_failure_injected(void); /* whether that call happened */
void fake_cuda_set_launch_hook(fake_cuda_launch_hook hook);

int fake_cuda_num_calls(void);
int fake_cuda_num_launches(void);
int fake_cuda_num_copies(void);
const fake_cuda_copy *fake_cuda_copies(void);
/* Modules loaded and not unloaded, in contexts still alive. */
int fake_cuda_live_modules(void);
/* The first violation seen since the last reset, or NULL. */
const char *fake_cuda_violation(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLEXSN_TEST_FUZZ_FAKECUDADRIVER_H */
