#include <stdint.h>

void SYMBOL(const real *restrict A, const real *restrict x, real *restrict y,
            const int64_t M, const int64_t N,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    for (int64_t j = 0; j < N; j++)
        y[j] = 0;
    for (int64_t i = 0; i < M; i++) {
        real t = 0;
        for (int64_t j = 0; j < N; j++)
            t += A[i * N + j] * x[j];
        for (int64_t j = 0; j < N; j++)
            y[j] += A[i * N + j] * t;
    }
}
