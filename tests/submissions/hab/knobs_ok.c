// HPCAgent-Bench fixture `knobs`: every kind of knob, and int32, int4,
// float32 and complex128 arrays.
#include <complex.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void knobs_fp64(const int32_t *restrict idx, const int8_t *restrict q,
                const float *restrict w, double *restrict x,
                const double _Complex *restrict z, int32_t K, int64_t N, bool bias,
                double eps, double scale, uint8_t *restrict workspace,
                int64_t workspace_size) {
  (void)workspace;
  (void)workspace_size;
  double *before = malloc((size_t)N * sizeof(double));
  if (!before) return;
  memcpy(before, x, (size_t)N * sizeof(double));
  for (int64_t i = 0; i < N; i++) {
    double picked = before[idx[i]] * (double)w[i] + cabs(z[i]) * eps + (double)(q[2 * i] + q[2 * i + 1]);
    x[i] = (K > 0 ? scale * picked : picked) + (bias ? 1.0 : 0.0);
  }
  free(before);
}
