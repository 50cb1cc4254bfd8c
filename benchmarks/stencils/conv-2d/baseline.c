#include <stdint.h>

void SYMBOL(const real *restrict A, real *restrict B, const int64_t NI, const int64_t NJ,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    const real c11 = (real)0.2, c21 = (real)0.5, c31 = (real)-0.8;
    const real c12 = (real)-0.3, c22 = (real)0.6, c32 = (real)-0.9;
    const real c13 = (real)0.4, c23 = (real)0.7, c33 = (real)0.10;

    for (int64_t i = 1; i < NI - 1; i++)
        for (int64_t j = 1; j < NJ - 1; j++)
            B[i * NJ + j] = c11 * A[(i - 1) * NJ + (j - 1)] + c12 * A[i * NJ + (j - 1)] + c13 * A[(i + 1) * NJ + (j - 1)]
                          + c21 * A[(i - 1) * NJ + j] + c22 * A[i * NJ + j] + c23 * A[(i + 1) * NJ + j]
                          + c31 * A[(i - 1) * NJ + (j + 1)] + c32 * A[i * NJ + (j + 1)] + c33 * A[(i + 1) * NJ + (j + 1)];
}
