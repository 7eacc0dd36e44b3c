/* Calls generated launch functions on a machine that may have no GPU: every
 * call must return a status, never crash. Prints one line per call. */
#include "plif.h"

#include <stdio.h>

static void report(const char *what, flexsn_status status) {
  printf("%s: %d %s\n", what, (int)status, flexsn_status_message(status));
}

int main(void) {
  /* Never dereferenced on the host: only checked, then handed to the GPU. */
  float *fake = (float *)(uintptr_t)0x10000;
  report("null input", flexsn_plif_inference_f32(NULL, 4, 8, 0, NULL, NULL,
                                                 fake, NULL, 0.0f));
  report("negative T", flexsn_plif_inference_f32(NULL, -1, 8, 0, fake, NULL,
                                                 fake, NULL, 0.0f));
  report("ld below N", flexsn_plif_inference_f32(NULL, 4, 8, 7, fake, NULL,
                                                 fake, NULL, 0.0f));
  report("nothing to do", flexsn_plif_inference_f32(NULL, 0, 8, 0, fake, NULL,
                                                    fake, NULL, 0.0f));
  report("well formed", flexsn_plif_inference_f32(NULL, 4, 8, 0, fake, NULL,
                                                  fake, NULL, 0.0f));
  report("unload", flexsn_plif_unload());
  return 0;
}
