#include <stdint.h>

void formula_fp64(double *restrict acc, const double *restrict lhs, const double *restrict rhs,
                  int64_t NI, int64_t NJ, int64_t NK, double scale) {
  for (int64_t i = 0; i < NI; i++)
    for (int64_t j = 0; j < NJ; j++) {
      double sum = 0.0;
      for (int64_t k = 0; k < NK; k++) sum += lhs[i * NK + k] * rhs[k * NJ + j];
      acc[i * NJ + j] += scale * sum;
    }
}
