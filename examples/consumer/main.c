/* Runs LIF (lib/Neurons/lif.mlir: tau = 2, threshold 1, hard reset to 0)
 * through the CPU header that flexsn_add_neuron_library generated, and
 * checks every spike and state against the neuron's formula:
 *   h = v + (x - v) / 2,  s = (h >= 1),  v' = (1 - s) h.
 * With CONSUMER_GPU, the GPU header links too: a call that is missing its
 * input is refused before any driver call. Exit status 0: all passed. */

#include "lif_cpu.h"
#ifdef CONSUMER_GPU
#include "lif.h"
#endif

#include <math.h>
#include <stdio.h>

enum { T = 5, N = 5000 };

static float x[T * N], v0[N], spike[T * N], v_seq[T * N];

int main(void) {
  for (int i = 0; i < T * N; ++i)
    x[i] = (float)((i * 37) % 101) / 40.0f; /* 0 to 2.5 */
  for (int n = 0; n < N; ++n)
    v0[n] = (float)(n % 7) / 10.0f;
  flexsn_status status =
      flexsn_cpu_lif_inference_f32(T, N, x, v0, spike, v_seq, 0);
  if (status != FLEXSN_SUCCESS) {
    printf("FAIL: status %d\n", (int)status);
    return 1;
  }
  int spikes = 0, wrong = 0;
  for (int n = 0; n < N; ++n) {
    double v = v0[n];
    for (int t = 0; t < T; ++t) {
      double h = v + (x[t * N + n] - v) / 2.0;
      double s = h >= 1.0 ? 1.0 : 0.0;
      v = (1.0 - s) * h;
      if (fabs(h - 1.0) < 1e-5)
        break; /* float rounding may decide this spike either way */
      spikes += s != 0.0;
      wrong += spike[t * N + n] != (float)s ||
               fabs(v_seq[t * N + n] - v) > 1e-5 * (1.0 + fabs(v));
    }
  }
  printf("CPU: %d spikes, %d wrong\n", spikes, wrong);
#ifdef CONSUMER_GPU
  printf("GPU: %s\n", flexsn_status_name(flexsn_lif_inference_f32(
                          NULL, T, N, 0, NULL, NULL, NULL, NULL)));
#endif
  return wrong == 0 && spikes > 0 ? 0 : 1;
}
