/* Runs LIF through the CPU header that flexsn_add_neuron_library generated
 * and checks every spike and state against the neuron's formula
 * (lif_reference.h). Exit status 0: all passed. */

#include "lif_cpu.h"
#include "lif_reference.h"

#include <stdio.h>

enum { T = 5, N = 5000 };

static float x[T * N], v0[N], spike[T * N], v_seq[T * N];

int main(void) {
  lif_fill_inputs(T, N, x, v0);
  flexsn_status status =
      flexsn_cpu_lif_inference_f32(T, N, x, v0, spike, v_seq, 0);
  if (status != FLEXSN_SUCCESS) {
    printf("FAIL: status %d\n", (int)status);
    return 1;
  }
  int spikes;
  int wrong = lif_count_wrong(T, N, x, v0, spike, v_seq, &spikes);
  printf("CPU: %d spikes, %d wrong\n", spikes, wrong);
  return wrong == 0 && spikes > 0 ? 0 : 1;
}
