/* Links the runtime from single-file headers: this file defines
 * FLEXSN_IMPLEMENTATION and includes two neurons' headers (the runtime's
 * code comes once); single_header_other.c includes one of them again
 * without it. Every call returns a status, never crashes, on a machine
 * without a GPU. */
#include <stdio.h>

#define FLEXSN_IMPLEMENTATION
#include "lif.h"
#include "plif.h"

int other_file_call(void);

static void report(const char *what, flexsn_status status) {
  printf("%s: %s (%s)\n", what, flexsn_status_name(status),
         flexsn_status_message(status));
}

int main(void) {
  /* Never dereferenced on the host: only checked, then handed to the GPU. */
  float *fake = (float *)(uintptr_t)0x10000;
  report("lif, no input",
         flexsn_lif_inference_f32(NULL, 4, 8, 0, NULL, NULL, fake, NULL));
  report("lif, negative T",
         flexsn_lif_inference_f32(NULL, -1, 8, 0, fake, NULL, fake, NULL));
  report("lif, nothing to do",
         flexsn_lif_inference_f32(NULL, 0, 8, 0, fake, NULL, fake, NULL));
  report("lif, well formed",
         flexsn_lif_inference_f32(NULL, 4, 8, 0, fake, NULL, fake, NULL));
  report("plif, ld below N", flexsn_plif_inference_f32(NULL, 4, 8, 7, fake,
                                                       NULL, fake, NULL, 0.0f));
  report("other file", (flexsn_status)other_file_call());
  printf("failed buffer: %d\n", flexsn_last_failed_buffer());
  report("unload", flexsn_lif_unload());
  return 0;
}
