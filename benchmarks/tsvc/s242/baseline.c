#include <stdint.h>

void SYMBOL(real *restrict a, const real *restrict b, const real *restrict c, const real *restrict d,
            const int64_t LEN, const real s1, const real s2,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    for (int64_t i = 1; i < LEN; i++)
        a[i] = a[i - 1] + s1 + s2 + b[i] + c[i] + d[i];
}
