/* Workspace sizes of PLIF's f16 training functions compiled with
 * save-in-storage-type: 2 bytes per saved value, rounded up to whole floats,
 * then the deterministic reduction scratch. */
#include "plif_train_saved_f16.h"

#include <stdio.h>

int main(void) {
  printf("workspace 3x5: %zu\n",
         flexsn_plif_backward_f16_deterministic_workspace_bytes(3, 5, 0));
  printf("workspace 3x5, ld 6: %zu\n",
         flexsn_plif_forward_f16_workspace_bytes(3, 5, 6));
  printf("workspace 16x1000: %zu\n",
         flexsn_plif_backward_f16_workspace_bytes(16, 1000, 0));
  return 0;
}
