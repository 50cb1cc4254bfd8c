// HPCAgent-Bench's loop-level tsvc_2_vtv written straight from its NumPy
// reference (a[i] = a[i] * b[i]): no faster than the C its translator
// emits, the denominator HPCAgent-Bench times this track against.
#include <stdint.h>

void tsvc_2_vtv_fp64(double *restrict a, const double *restrict b, int64_t LEN_1D,
                     uint8_t *restrict workspace, int64_t workspace_size) {
  (void)workspace;
  (void)workspace_size;
  for (int64_t i = 0; i < LEN_1D; i++) a[i] = a[i] * b[i];
}
