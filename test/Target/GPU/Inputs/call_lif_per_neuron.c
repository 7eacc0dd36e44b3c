/* Calls the training functions of LIF with a trainable per-neuron threshold
 * on a machine that may have no GPU: the threshold's values and gradient are
 * required [N] float buffers, checked before any driver call. Prints one
 * line per check. */
#include "lif_per_neuron.h"

#include <stdio.h>

static void report(const char *what, flexsn_status status) {
  printf("%s: %d %s (buffer %d)\n", what, (int)status,
         flexsn_status_message(status), flexsn_last_failed_buffer());
}

int main(void) {
  /* Never dereferenced on the host: only checked, then handed to the GPU. */
  float *fake = (float *)(uintptr_t)0x10000;
  /* One saved sequence and no reduction scratch: no scalar gradient. */
  printf("workspace 16x1000: %zu %zu\n",
         flexsn_lif_forward_f32_workspace_bytes(16, 1000, 0),
         flexsn_lif_backward_f32_workspace_bytes(16, 1000, 0));
  report("forward, no threshold",
         flexsn_lif_forward_f32(NULL, 4, 8, 0, fake, NULL, fake, NULL, NULL,
                                fake));
  report("backward, no threshold gradient",
         flexsn_lif_backward_f32(NULL, 4, 8, 0, fake, NULL, NULL, fake, NULL,
                                 fake, NULL, fake));
  report("backward, T = 0, no threshold gradient",
         flexsn_lif_backward_f32(NULL, 0, 8, 0, fake, NULL, NULL, fake, NULL,
                                 fake, NULL, fake));
  report("backward, well formed",
         flexsn_lif_backward_f32(NULL, 4, 8, 0, fake, NULL, NULL, fake, NULL,
                                 fake, fake, fake));
  return 0;
}
