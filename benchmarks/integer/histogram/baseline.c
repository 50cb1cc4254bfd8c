#include <stdint.h>

void SYMBOL(int64_t *restrict counts, const int32_t *restrict x, const int64_t BINS, const int64_t N,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    for (int64_t b = 0; b < BINS; b++)
        counts[b] = 0;
    for (int64_t i = 0; i < N; i++)
        counts[x[i]]++;
}
