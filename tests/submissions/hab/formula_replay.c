// Hostile: computes its first call's answer and replays it on every later
// call, whatever the inputs: right wherever the judge repeats the public
// case's values at the public sizes, as an initializer that takes no seed
// would make every case.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static double *first;

void formula_fp64(double *restrict acc, const double *restrict lhs,
                  const double *restrict rhs, int64_t NI, int64_t NJ,
                  int64_t NK, double scale, uint8_t *restrict workspace,
                  int64_t workspace_size) {
  (void)workspace;
  (void)workspace_size;
  size_t bytes = (size_t)(NI * NJ) * sizeof(double);
  if (first) {
    memcpy(acc, first, bytes);
    return;
  }
  for (int64_t i = 0; i < NI; i++)
    for (int64_t j = 0; j < NJ; j++) {
      double sum = 0.0;
      for (int64_t k = 0; k < NK; k++) sum += lhs[i * NK + k] * rhs[k * NJ + j];
      acc[i * NJ + j] += scale * sum;
    }
  first = malloc(bytes);
  if (first) memcpy(first, acc, bytes);
}
