/*===- flexsn_backend.h - What the runtime asks of a device ------*- C -*-===//
 *
 * Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
 *
 *===----------------------------------------------------------------------===//
 *
 * flexsn_runtime.c checks a launch against its flexsn_kernel_desc (the
 * buffers, the sizes, the extents, which entry to run) without any device;
 * a backend does what needs one: find the call's context, check a
 * buffer's memory, load an image's entry, copy, zero and launch. The
 * runtime picks the first backend of its table that accepts the image
 * (flexsn_runtime_cuda.c: the CUDA driver's, which loads cubins, fatbins and
 * PTX). Internal to the runtime: no program includes this header, but the
 * runtime's tests add a recording backend with flexsn_add_backend.
 *
 *===----------------------------------------------------------------------===*/

#ifndef FLEXSN_RUNTIME_FLEXSN_BACKEND_H
#define FLEXSN_RUNTIME_FLEXSN_BACKEND_H

#include "flexsn_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define FLEXSN_THREAD_LOCAL _Thread_local
#elif defined(__cplusplus)
#define FLEXSN_THREAD_LOCAL thread_local
#else
#define FLEXSN_THREAD_LOCAL __thread /* GCC, Clang: dlopen makes us POSIX */
#endif

/* Threads per block of every launch (the kernels are compiled for it). */
#define FLEXSN_BLOCK_THREADS 256

/* A device's part of a launch. `context` is the backend's handle of the
   device context a call runs in; `function` its handle of a loaded entry.
   Each returns FLEXSN_SUCCESS or the status to report, having recorded its
   device's error code where it has one. */
typedef struct flexsn_backend {
  const char *name;
  /* Whether the backend loads the image's bytes. */
  int (*accepts)(const flexsn_image *image);
  /* The context of a call on `stream` (NULL: the default stream): the
     calling thread's, or else the one the device of `buffer` (may be NULL)
     is active in; the stream's must agree. */
  flexsn_status (*enter)(flexsn_stream stream, const void *buffer,
                         void **context);
  /* Whether kernels in `context` may read (and, `written`, write) `bytes`
     bytes at `p`. */
  flexsn_status (*check_buffer)(void *context, const void *p, int64_t bytes,
                                int written);
  /* The entry `name` of `image` in `context`, loading the image there
     first; the image's `state` is the backend's. */
  flexsn_status (*get_function)(flexsn_image *image, void *context,
                                const char *name, void **function);
  /* Stream-ordered copy and zeroing of `bytes` device bytes. */
  flexsn_status (*copy)(void *dst, const void *src, size_t bytes,
                        flexsn_stream stream);
  flexsn_status (*zero)(void *dst, size_t bytes, flexsn_stream stream);
  /* Runs `function` on `blocks` blocks of FLEXSN_BLOCK_THREADS threads,
     with the addresses of its arguments in `params`. */
  flexsn_status (*launch)(void *function, unsigned int blocks,
                          flexsn_stream stream, void **params);
  /* Frees what the image's `state` holds (its modules in every context
     still alive) and clears it. */
  flexsn_status (*unload)(flexsn_image *image);
} flexsn_backend;

/* The CUDA driver's backend (flexsn_runtime_cuda.c), last in the table. */
extern const flexsn_backend flexsn_cuda_backend;

/* Puts `backend` first in the table (at most 4 more than CUDA's); 0 when
   the table is full. For the runtime's tests. */
int flexsn_add_backend(const flexsn_backend *backend);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLEXSN_RUNTIME_FLEXSN_BACKEND_H */
