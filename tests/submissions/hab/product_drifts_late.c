// HPCAgent-Bench fixture `product`: correct within tolerance, but from its
// tenth call on the last bits change. The public case's two calls at the
// end of a submit, after its timed and held-out calls, see the change.
#include <stdint.h>

static int calls;

void product_fp64(const double *restrict left, double *restrict out,
                  const double *restrict right, int64_t NI, int64_t NJ,
                  int64_t NK, double gain, int64_t steps,
                  uint8_t *restrict workspace, int64_t workspace_size) {
  (void)workspace;
  (void)workspace_size;
  calls++;
  double scale = (double)steps * gain;
  for (int64_t i = 0; i < NI; i++)
    for (int64_t j = 0; j < NJ; j++) {
      double sum = 0.0;
      for (int64_t k = 0; k < NK; k++) sum += left[i * NK + k] * right[k * NJ + j];
      out[i * NJ + j] += scale * sum;
    }
  if (calls >= 10) out[0] += 1e-15 * out[0];
}
