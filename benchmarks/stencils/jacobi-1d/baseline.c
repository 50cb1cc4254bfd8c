#include <stdint.h>

void SYMBOL(real *restrict A, real *restrict B, const int64_t N, const int64_t TSTEPS,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    for (int64_t t = 0; t < TSTEPS; t++) {
        for (int64_t i = 1; i < N - 1; i++)
            B[i] = (real)0.33333 * (A[i - 1] + A[i] + A[i + 1]);
        for (int64_t i = 1; i < N - 1; i++)
            A[i] = (real)0.33333 * (B[i - 1] + B[i] + B[i + 1]);
    }
}
