// Off by 1e-9·|a| + 1e-7 everywhere but a[0]: within this corpus's own
// rule (rtol 1e-9, atol 1e-11 scaled by the largest |a|, about 1.6e4 at S),
// outside HPCAgent-Bench's plain allclose (atol 1e-11 as given).
#include <stdint.h>

void shift_fp64(double *restrict a, const double *restrict b, int64_t LEN,
                uint8_t *restrict workspace, int64_t workspace_size) {
  (void)workspace;
  (void)workspace_size;
  double sum = a[0];
  for (int64_t i = 1; i < LEN; i++) {
    sum += b[i];
    a[i] = sum * (1.0 + 1e-9) + 1e-7;
  }
}
