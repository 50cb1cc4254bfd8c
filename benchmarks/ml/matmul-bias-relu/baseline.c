#include <stdint.h>

void SYMBOL(const real *restrict W, const real *restrict X, real *restrict Y, const real *restrict b,
            const int64_t K, const int64_t M, const int64_t N,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    for (int64_t i = 0; i < M; i++) {
        real *y = Y + i * N;
        for (int64_t j = 0; j < N; j++)
            y[j] = b[j];
        for (int64_t k = 0; k < K; k++) {
            const real a = X[i * K + k];
            const real *w = W + k * N;
            for (int64_t j = 0; j < N; j++)
                y[j] += a * w[j];
        }
        for (int64_t j = 0; j < N; j++)
            y[j] = y[j] > 0 ? y[j] : 0;
    }
}
