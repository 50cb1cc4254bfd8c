// HPCAgent-Bench fixture `narrow`: y = x*w + q[:,0] + q[:,1] + o + (u % 3)*eps,
// with w float, q int4 in bytes, o int8 and u uint16.
#include <stdint.h>

void narrow_fp64(const int8_t *restrict o, const int8_t *restrict q,
                 const uint16_t *restrict u, const float *restrict w,
                 const double *restrict x, double *restrict y, int64_t N,
                 double eps, uint8_t *restrict workspace, int64_t workspace_size) {
  (void)workspace;
  (void)workspace_size;
  for (int64_t i = 0; i < N; i++)
    y[i] = x[i] * (double)w[i] + (double)(q[2 * i] + q[2 * i + 1]) + (double)o[i] +
           (double)(u[i] % 3) * eps;
}
