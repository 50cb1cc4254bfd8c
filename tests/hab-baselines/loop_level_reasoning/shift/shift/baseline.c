#include <stdint.h>

void shift_fp64(double *restrict a, const double *restrict b, int64_t LEN) {
  for (int64_t i = 1; i < LEN; i++) a[i] = a[i - 1] + b[i];
}
