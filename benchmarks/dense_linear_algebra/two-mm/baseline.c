#include <stdint.h>

void SYMBOL(const real *restrict A, const real *restrict B, const real *restrict C, real *restrict D,
            const int64_t NI, const int64_t NJ, const int64_t NK, const int64_t NL,
            const real alpha, const real beta,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    real *restrict tmp = (real *)workspace;
    for (int64_t i = 0; i < NI; i++)
        for (int64_t j = 0; j < NJ; j++) {
            tmp[i * NJ + j] = 0;
            for (int64_t k = 0; k < NK; k++)
                tmp[i * NJ + j] += alpha * A[i * NK + k] * B[k * NJ + j];
        }
    for (int64_t i = 0; i < NI; i++)
        for (int64_t j = 0; j < NL; j++) {
            D[i * NL + j] *= beta;
            for (int64_t k = 0; k < NJ; k++)
                D[i * NL + j] += tmp[i * NJ + k] * C[k * NL + j];
        }
}
