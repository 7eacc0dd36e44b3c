/*===- flexsn_status.h - FlexSN status codes ----------------------*- C -*-===//
 *
 * Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
 *
 *===----------------------------------------------------------------------===//
 *
 * The status every generated function returns: the GPU header's launches
 * (flexsn_runtime.h) and the CPU header's calls. It needs nothing else, so
 * a CPU-only program includes it without the CUDA headers; the messages and
 * names are in the FlexSN runtime library.
 *
 *===----------------------------------------------------------------------===*/

#ifndef FLEXSN_RUNTIME_FLEXSN_STATUS_H
#define FLEXSN_RUNTIME_FLEXSN_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum flexsn_status {
  FLEXSN_SUCCESS = 0,
  FLEXSN_ERROR_NULL_POINTER,     /* a required buffer (an input, the workspace,
                                    a parameter's values or gradient) is NULL */
  FLEXSN_ERROR_NEGATIVE_SIZE,    /* T or N < 0 */
  FLEXSN_ERROR_BAD_STRIDE,       /* ld (time stride) < N, or ld < 0 */
  FLEXSN_ERROR_SIZE_OVERFLOW,    /* a buffer's extent in bytes overflows int64,
                                    or N needs more than 2^31-1 blocks */
  FLEXSN_ERROR_INVALID_ARGUMENT, /* malformed descriptor / scalars missing /
                                    buffer misaligned to element_size */
  FLEXSN_ERROR_NO_DRIVER,  /* libcuda.so.1 could not be loaded, lacks a needed
                              symbol, or cuInit failed */
  FLEXSN_ERROR_NO_CONTEXT, /* no current CUDA context on the calling thread
                             (nor an active primary one to adopt) */
  FLEXSN_ERROR_CONTEXT_MISMATCH, /* a buffer or the stream belongs to another
                                    context, or a buffer is not
                                    device-accessible memory */
  FLEXSN_ERROR_BUFFER_TOO_SMALL, /* the allocation holding a buffer ends before
                                    the buffer's extent */
  FLEXSN_ERROR_MODULE_LOAD,      /* cuModuleLoadData failed (e.g. the cubin's
                                    architecture does not match the device) */
  FLEXSN_ERROR_KERNEL_NOT_FOUND, /* the image has no entry of that name */
  FLEXSN_ERROR_LAUNCH,           /* cuLaunchKernel failed */
  FLEXSN_ERROR_CUDA,             /* another driver call failed */
  FLEXSN_ERROR_BAD_CHANNELS,     /* a kernel with per-channel buffers got
                                    C < 1, C > 2^31-1, S < 1, or N not a
                                    multiple of C * S */
  FLEXSN_ERROR_BAD_COUPLING      /* a coupled kernel got H < 1, H over its
                                    most, or N not a multiple of H; or a
                                    kernel got the other launch function */
} flexsn_status;

/* A readable message for `status`; never NULL ("unknown status" for a value
   outside the enum). */
const char *flexsn_status_message(flexsn_status status);

/* The enumerator's name ("FLEXSN_ERROR_NULL_POINTER"); never NULL
   ("FLEXSN_UNKNOWN_STATUS" for a value outside the enum). For bindings that
   turn statuses into exceptions. */
const char *flexsn_status_name(flexsn_status status);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLEXSN_RUNTIME_FLEXSN_STATUS_H */
