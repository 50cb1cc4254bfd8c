#include <stdint.h>

#define AT(X, i, j, k) X[((i) * N + (j)) * N + (k)]

static void step(const real *restrict src, real *restrict dst, const int64_t N)
{
    for (int64_t i = 1; i < N - 1; i++)
        for (int64_t j = 1; j < N - 1; j++)
            for (int64_t k = 1; k < N - 1; k++) {
                const real c = AT(src, i, j, k);
                AT(dst, i, j, k) = (real)0.125 * (AT(src, i + 1, j, k) - (real)2.0 * c + AT(src, i - 1, j, k))
                                 + (real)0.125 * (AT(src, i, j + 1, k) - (real)2.0 * c + AT(src, i, j - 1, k))
                                 + (real)0.125 * (AT(src, i, j, k + 1) - (real)2.0 * c + AT(src, i, j, k - 1))
                                 + c;
            }
}

void SYMBOL(real *restrict A, real *restrict B, const int64_t N, const int64_t TSTEPS,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    for (int64_t t = 0; t < TSTEPS; t++) {
        step(A, B, N);
        step(B, A, N);
    }
}
