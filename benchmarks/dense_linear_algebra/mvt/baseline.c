#include <stdint.h>

void SYMBOL(const real *restrict A, real *restrict x1, real *restrict x2,
            const real *restrict y_1, const real *restrict y_2, const int64_t N,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < N; j++)
            x1[i] = x1[i] + A[i * N + j] * y_1[j];
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < N; j++)
            x2[i] = x2[i] + A[j * N + i] * y_2[j];
}
