/* Runs LIF's GPU kernels through a generated header, lif.h, and checks every
 * spike and state against the neuron's formula (lif_reference.h). The same
 * program builds two ways:
 *   - with CMake: lif.h from flexsn_add_neuron_library, FlexSN::runtime
 *     and the CUDA driver (CMakeLists.txt, -DCONSUMER_GPU=ON);
 *   - with plain gcc and the single-file header, which holds the runtime
 *     (-DLIF_SINGLE_HEADER; build-single-header.sh).
 * It uses the CUDA driver API for memory, as any CUDA program would.
 * Exit status 0: all passed, or no GPU to run on (then it says so). */

#ifdef LIF_SINGLE_HEADER
#define FLEXSN_IMPLEMENTATION /* this file holds the runtime's code */
#endif
#include "lif.h"
#include "lif_reference.h"

#include <cuda.h>
#include <stdio.h>

enum { T = 5, N = 5000 };

static float x[T * N], v0[N], spike[T * N], v_seq[T * N];

#define CHECK_CU(call)                                                         \
  do {                                                                         \
    CUresult r_ = (call);                                                      \
    if (r_ != CUDA_SUCCESS) {                                                  \
      printf("FAIL: %s: CUDA error %d\n", #call, (int)r_);                     \
      return 1;                                                                \
    }                                                                          \
  } while (0)

int main(void) {
  /* Refused before any driver call: the input sequence is required. */
  flexsn_status refused =
      flexsn_lif_inference_f32(NULL, T, N, 0, NULL, NULL, NULL, NULL);
  printf("GPU, no input: %s\n", flexsn_status_name(refused));
  if (refused != FLEXSN_ERROR_NULL_POINTER)
    return 1;

  int devices = 0;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&devices) != CUDA_SUCCESS ||
      devices == 0) {
    printf("GPU: no CUDA device, not run\n");
    return 0;
  }
  CUdevice device;
  CUcontext context;
  CHECK_CU(cuDeviceGet(&device, 0));
  CHECK_CU(cuDevicePrimaryCtxRetain(&context, device));
  CHECK_CU(cuCtxSetCurrent(context));

  lif_fill_inputs(T, N, x, v0);
  CUdeviceptr d_x, d_v0, d_spike, d_v_seq;
  CHECK_CU(cuMemAlloc(&d_x, sizeof x));
  CHECK_CU(cuMemAlloc(&d_v0, sizeof v0));
  CHECK_CU(cuMemAlloc(&d_spike, sizeof spike));
  CHECK_CU(cuMemAlloc(&d_v_seq, sizeof v_seq));
  CHECK_CU(cuMemcpyHtoD(d_x, x, sizeof x));
  CHECK_CU(cuMemcpyHtoD(d_v0, v0, sizeof v0));
  /* Poisoned, so that an element the kernel skips is counted wrong. */
  CHECK_CU(cuMemsetD32(d_spike, 0x7fc00000u, T * N));
  CHECK_CU(cuMemsetD32(d_v_seq, 0x7fc00000u, T * N));

  CUstream stream;
  CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  flexsn_status status = flexsn_lif_inference_f32(
      stream, T, N, 0, (const float *)(uintptr_t)d_x,
      (const float *)(uintptr_t)d_v0, (float *)(uintptr_t)d_spike,
      (float *)(uintptr_t)d_v_seq);
  if (status != FLEXSN_SUCCESS) {
    printf("FAIL: %s: %s\n", flexsn_status_name(status),
           flexsn_status_message(status));
    return 1;
  }
  CHECK_CU(cuStreamSynchronize(stream));
  CHECK_CU(cuMemcpyDtoH(spike, d_spike, sizeof spike));
  CHECK_CU(cuMemcpyDtoH(v_seq, d_v_seq, sizeof v_seq));

  int spikes;
  int wrong = lif_count_wrong(T, N, x, v0, spike, v_seq, &spikes);
  printf("GPU: %d spikes, %d wrong\n", spikes, wrong);

  CHECK_CU(cuStreamDestroy(stream));
  CHECK_CU(cuMemFree(d_x));
  CHECK_CU(cuMemFree(d_v0));
  CHECK_CU(cuMemFree(d_spike));
  CHECK_CU(cuMemFree(d_v_seq));
  if (flexsn_lif_unload() != FLEXSN_SUCCESS)
    return 1;
  CHECK_CU(cuDevicePrimaryCtxRelease(device));
  return wrong == 0 && spikes > 0 ? 0 : 1;
}
