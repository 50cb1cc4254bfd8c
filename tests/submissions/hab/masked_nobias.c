// HPCAgent-Bench fixture `masked`: y = x[idx] * (mask % 2) + bias.
#include <stdbool.h>
#include <stdint.h>

void mgather_fp64(const int32_t *restrict idx, const uint8_t *restrict mask,
                 const double *restrict x, double *restrict y, int64_t N,
                 bool bias, uint8_t *restrict workspace, int64_t workspace_size) {
  (void)workspace;
  (void)workspace_size;
  for (int64_t i = 0; i < N; i++)
    y[i] = x[idx[i]] * (double)(mask[i] % 2) + 0.0;
}
