#include <stdint.h>

void SYMBOL(real *restrict a, const real *restrict b, const int64_t LEN,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    for (int64_t i = 1; i < LEN; i += 2)
        a[i] = a[i - 1] + b[i];
}
