#include <stdint.h>

void SYMBOL(real *restrict a, const real *restrict b, const int64_t LEN,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    for (int64_t i = LEN - 1; i >= 0; i--)
        a[i] = b[i] + (real)1.0;
}
