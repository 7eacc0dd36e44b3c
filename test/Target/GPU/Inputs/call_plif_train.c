/* Calls PLIF's generated training functions on a machine that may have no
 * GPU: workspace sizes, then statuses. Prints one line per check. */
#include "plif_train.h"

#include <stdio.h>

static void report(const char *what, flexsn_status status) {
  printf("%s: %d %s\n", what, (int)status, flexsn_status_message(status));
}

int main(void) {
  /* Never dereferenced on the host: only checked, then handed to the GPU. */
  float *fake = (float *)(uintptr_t)0x10000;
  /* One saved sequence of T x ld floats, then the scratch: a counter and one
     float per 256-neuron block for the one trainable parameter. */
  printf("workspace 16x1000: %zu %zu %zu %zu\n",
         flexsn_plif_forward_f32_workspace_bytes(16, 1000, 0),
         flexsn_plif_forward_final_state_f32_workspace_bytes(16, 1000, 0),
         flexsn_plif_backward_f32_workspace_bytes(16, 1000, 0),
         flexsn_plif_backward_f32_deterministic_workspace_bytes(16, 1000, 0));
  printf("workspace 0x257, ld 300: %zu\n",
         flexsn_plif_backward_f32_deterministic_workspace_bytes(0, 257, 300));
  report("deterministic, no workspace",
         flexsn_plif_backward_f32_deterministic(NULL, 4, 8, 0, fake, NULL, fake,
                                                NULL, fake, NULL, fake, NULL,
                                                0.0f));
  report("deterministic, no parameter gradient",
         flexsn_plif_backward_f32_deterministic(NULL, 4, 8, 0, fake, NULL, fake,
                                                NULL, fake, NULL, NULL, fake,
                                                0.0f));
  report("deterministic, well formed", flexsn_plif_backward_f32_deterministic(
                                           NULL, 4, 8, 0, fake, NULL, fake,
                                           NULL, fake, NULL, fake, fake, 0.0f));
  return 0;
}
