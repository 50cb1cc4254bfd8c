#include <stdint.h>

void SYMBOL(const real *restrict A, const real *restrict B, const real *restrict x,
            real *restrict y, const int64_t N, const real alpha, const real beta,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    for (int64_t i = 0; i < N; i++) {
        real a = 0, b = 0;
        for (int64_t j = 0; j < N; j++) {
            a += A[i * N + j] * x[j];
            b += B[i * N + j] * x[j];
        }
        y[i] = alpha * a + beta * b;
    }
}
