#include <stdint.h>

void SYMBOL(const int64_t *restrict cols, const real *restrict vals, const real *restrict x,
            real *restrict y, const int64_t K, const int64_t N, const int64_t NCOL,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    for (int64_t i = 0; i < N; i++) {
        real s = 0;
        for (int64_t k = i * K; k < (i + 1) * K; k++)
            s += vals[k] * x[cols[k]];
        y[i] = s;
    }
}
