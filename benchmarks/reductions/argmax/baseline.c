#include <stdint.h>

void SYMBOL(int64_t *restrict idx, const real *restrict x, const int64_t N,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    int64_t best = 0;
    real m = x[0];
    for (int64_t i = 1; i < N; i++)
        if (x[i] > m) {
            m = x[i];
            best = i;
        }
    idx[0] = best;
}
