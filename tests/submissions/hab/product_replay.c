// Hostile: computes once, then answers every later call with the first
// answer (right on the public case's repeated calls, wrong on new inputs).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static double *remembered;

void product_fp64(const double *restrict left, double *restrict out,
                  const double *restrict right, int64_t NI, int64_t NJ,
                  int64_t NK, double gain, int64_t steps,
                  uint8_t *restrict workspace, int64_t workspace_size) {
  (void)workspace;
  (void)workspace_size;
  size_t bytes = (size_t)(NI * NJ) * sizeof(double);
  if (remembered) {
    memcpy(out, remembered, bytes);
    return;
  }
  double scale = (double)steps * gain;
  for (int64_t i = 0; i < NI; i++)
    for (int64_t j = 0; j < NJ; j++) {
      double sum = 0.0;
      for (int64_t k = 0; k < NK; k++) sum += left[i * NK + k] * right[k * NJ + j];
      out[i * NJ + j] += scale * sum;
    }
  remembered = malloc(bytes);
  if (remembered) memcpy(remembered, out, bytes);
}
