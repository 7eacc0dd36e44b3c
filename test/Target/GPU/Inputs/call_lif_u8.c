/* Calls LIF's inference functions that store spikes as bytes and as bits,
 * on a machine that may have no GPU: the spike buffer is a uint8_t
 * sequence, which needs no alignment, while the float buffers keep theirs.
 * Prints one line per check. */
#include "lif_u8.h"

#include <stdio.h>

static void report(const char *what, flexsn_status status) {
  printf("%s: %d %s (buffer %d)\n", what, (int)status,
         flexsn_status_message(status), flexsn_last_failed_buffer());
}

int main(void) {
  /* Never dereferenced on the host: only checked, then handed to the GPU. */
  float *fake = (float *)(uintptr_t)0x10000;
  uint8_t *odd = (uint8_t *)(uintptr_t)0x10001;
  report("no input", flexsn_lif_inference_f32_spikes_u8(NULL, 4, 8, 0, NULL,
                                                        NULL, odd, NULL));
  report("odd spike address", flexsn_lif_inference_f32_spikes_u8(
                                  NULL, 4, 8, 0, fake, NULL, odd, fake));
  report("odd state address",
         flexsn_lif_inference_f32_spikes_u8(NULL, 4, 8, 0, fake, NULL, odd,
                                            (float *)(uintptr_t)0x10001));
  report("bits, no input", flexsn_lif_inference_f32_spikes_bits(
                               NULL, 4, 8, 0, NULL, NULL, odd, NULL));
  report("bits, odd spike address", flexsn_lif_inference_f32_spikes_bits(
                                        NULL, 4, 8, 0, fake, NULL, odd, fake));
  report("bits, odd state address",
         flexsn_lif_inference_f32_spikes_bits(NULL, 4, 8, 0, fake, NULL, odd,
                                              (float *)(uintptr_t)0x10001));
  return 0;
}
