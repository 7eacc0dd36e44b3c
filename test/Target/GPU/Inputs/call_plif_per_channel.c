/* Calls the training functions of PLIF with a per-channel w on a machine
 * that may have no GPU: the stubs take C and S, which the runtime checks
 * against N before anything else about the buffers, and w's values and
 * gradient are required [C] float buffers. Prints one line per check. */
#include "plif_per_channel.h"

#include <stdio.h>

static void report(const char *what, flexsn_status status) {
  printf("%s: %s (buffer %d)\n", what, flexsn_status_name(status),
         flexsn_last_failed_buffer());
}

int main(void) {
  /* Never dereferenced on the host: only checked, then handed to the GPU. */
  float *fake = (float *)(uintptr_t)0x10000;
  /* [B, C, S] = [2, 3, 4]: N = 24. */
  report("forward, well formed",
         flexsn_plif_forward_f32(NULL, 4, 24, 0, 3, 4, fake, NULL, fake, NULL,
                                 fake, fake));
  report("forward, N not a multiple of C * S",
         flexsn_plif_forward_f32(NULL, 4, 24, 0, 5, 4, fake, NULL, fake, NULL,
                                 fake, fake));
  report("forward, no channels",
         flexsn_plif_forward_f32(NULL, 4, 24, 0, 0, 4, fake, NULL, fake, NULL,
                                 fake, fake));
  report("forward, no w",
         flexsn_plif_forward_f32(NULL, 4, 24, 0, 3, 4, fake, NULL, fake, NULL,
                                 NULL, fake));
  report("backward, no w gradient",
         flexsn_plif_backward_f32(NULL, 4, 24, 0, 3, 4, fake, NULL, fake, NULL,
                                  fake, NULL, fake, NULL, fake));
  report("backward, T = 0, no w gradient",
         flexsn_plif_backward_f32(NULL, 0, 24, 0, 3, 4, fake, NULL, fake, NULL,
                                  fake, NULL, fake, NULL, fake));
  report("backward, well formed",
         flexsn_plif_backward_f32(NULL, 4, 24, 0, 3, 4, fake, NULL, fake, NULL,
                                  fake, NULL, fake, fake, fake));
  return 0;
}
