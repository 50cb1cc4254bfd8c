#include <stdint.h>

void SYMBOL(real *restrict A, const real *restrict C4,
            const int64_t NP, const int64_t NQ, const int64_t NR,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    real *restrict sum = (real *)workspace;
    for (int64_t r = 0; r < NR; r++)
        for (int64_t q = 0; q < NQ; q++) {
            real *restrict row = A + (r * NQ + q) * NP;
            for (int64_t p = 0; p < NP; p++) {
                sum[p] = 0;
                for (int64_t s = 0; s < NP; s++)
                    sum[p] += row[s] * C4[s * NP + p];
            }
            for (int64_t p = 0; p < NP; p++)
                row[p] = sum[p];
        }
}
