#include <stdint.h>

void SYMBOL(real *restrict a, const real *restrict b, const real *restrict c, const real *restrict e,
            const int64_t LEN, uint8_t *restrict workspace, const int64_t workspace_size)
{
    for (int64_t i = 0; i < LEN - 1; i++) {
        a[i + 1] = b[i] + e[i];
        a[i] = b[i] + c[i];
    }
}
