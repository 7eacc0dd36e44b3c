/* cuda.h before or after the single-file header (CUDA_FIRST): the
 * header's driver declarations are its own, so both orders compile, and a
 * CUstream is passed as the stream as is. */
#ifdef CUDA_FIRST
#include <cuda.h>
#endif
#define FLEXSN_IMPLEMENTATION
#include "lif.h"
#ifndef CUDA_FIRST
#include <cuda.h>
#endif

int main(void) {
  CUstream stream = NULL;
  return flexsn_lif_inference_f32(stream, 4, 8, 0, NULL, NULL, NULL, NULL) ==
                 FLEXSN_ERROR_NULL_POINTER
             ? 0
             : 1;
}
