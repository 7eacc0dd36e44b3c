/* A second file of the program: the declarations only. */
#include "lif.h"

int other_file_call(void) {
  float *fake = (float *)(uintptr_t)0x10000;
  float *misaligned = (float *)(uintptr_t)0x10001;
  return (int)flexsn_lif_inference_f32(NULL, 4, 8, 0, fake, misaligned, fake,
                                       NULL);
}
