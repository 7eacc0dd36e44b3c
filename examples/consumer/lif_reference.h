/* LIF as lib/Neurons/lif.mlir defines it (tau = 2, threshold 1, hard reset
 * to 0), written out by hand: the examples check the kernels against it.
 *   h = v + (x - v) / 2,  s = (h >= 1),  v' = (1 - s) h */
#ifndef LIF_REFERENCE_H
#define LIF_REFERENCE_H

#include <math.h>

/* Inputs from 0 to 2.5 and initial states from 0 to 0.6: enough spikes. */
static void lif_fill_inputs(int T, int N, float *x, float *v0) {
  for (int i = 0; i < T * N; ++i)
    x[i] = (float)((i * 37) % 101) / 40.0f;
  for (int n = 0; n < N; ++n)
    v0[n] = (float)(n % 7) / 10.0f;
}

/* Counts the kernel's wrong spikes and states ([T, N], row-major); sets
 * *spikes to the number of spikes checked. A neuron whose charge lands
 * within float rounding of the threshold is left unchecked from there on:
 * rounding may decide that spike either way. */
static int lif_count_wrong(int T, int N, const float *x, const float *v0,
                           const float *spike, const float *v_seq,
                           int *spikes) {
  int wrong = 0;
  *spikes = 0;
  for (int n = 0; n < N; ++n) {
    double v = v0[n];
    for (int t = 0; t < T; ++t) {
      double h = v + (x[t * N + n] - v) / 2.0;
      double s = h >= 1.0 ? 1.0 : 0.0;
      v = (1.0 - s) * h;
      if (fabs(h - 1.0) < 1e-5)
        break;
      *spikes += s != 0.0;
      /* Written so that a NaN (an element never written) counts. */
      wrong += spike[t * N + n] != (float)s ||
               !(fabs(v_seq[t * N + n] - v) <= 1e-5 * (1.0 + fabs(v)));
    }
  }
  return wrong;
}

#endif /* LIF_REFERENCE_H */
