#include <stdbool.h>
#include <stdint.h>

void masked_fp64(const int32_t *restrict idx, const uint8_t *restrict mask, const double *restrict x,
                 double *restrict y, int64_t N, bool bias) {
  for (int64_t i = 0; i < N; i++) y[i] = x[idx[i]] * (double)(mask[i] % 2) + (bias ? 1.0 : 0.0);
}
