// HPCAgent-Bench fixture `shift`: a running sum (a[i] = a[i-1] + b[i]).
#include <stdint.h>

void shift_fp64(double *restrict a, const double *restrict b, int64_t LEN,
                uint8_t *restrict workspace, int64_t workspace_size) {
  (void)workspace;
  (void)workspace_size;
  for (int64_t i = 1; i < LEN; i++) a[i] = a[i - 1] + b[i];
}
