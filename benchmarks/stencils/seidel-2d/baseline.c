#include <stdint.h>

void SYMBOL(real *restrict A, const int64_t N, const int64_t TSTEPS,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    for (int64_t t = 0; t < TSTEPS; t++)
        for (int64_t i = 1; i < N - 1; i++)
            for (int64_t j = 1; j < N - 1; j++)
                A[i * N + j] = (A[(i - 1) * N + j - 1] + A[(i - 1) * N + j] + A[(i - 1) * N + j + 1]
                                + A[i * N + j - 1] + A[i * N + j] + A[i * N + j + 1]
                                + A[(i + 1) * N + j - 1] + A[(i + 1) * N + j] + A[(i + 1) * N + j + 1])
                               / (real)9.0;
}
