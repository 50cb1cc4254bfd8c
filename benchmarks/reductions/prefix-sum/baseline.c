#include <stdint.h>

void SYMBOL(const real *restrict x, real *restrict y, const int64_t N,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    real s = 0;
    for (int64_t i = 0; i < N; i++) {
        s += x[i];
        y[i] = s;
    }
}
