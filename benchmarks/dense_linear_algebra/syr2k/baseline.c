#include <stdint.h>

void SYMBOL(const real *restrict A, const real *restrict B, real *restrict C,
            const int64_t M, const int64_t N, const real alpha, const real beta,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    for (int64_t i = 0; i < N; i++) {
        for (int64_t j = 0; j <= i; j++)
            C[i * N + j] *= beta;
        for (int64_t k = 0; k < M; k++)
            for (int64_t j = 0; j <= i; j++)
                C[i * N + j] += A[j * M + k] * alpha * B[i * M + k]
                              + B[j * M + k] * alpha * A[i * M + k];
    }
}
