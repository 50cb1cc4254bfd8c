#include <stdint.h>

void SYMBOL(real *restrict out, const real *restrict wt, const real *restrict x,
            const int64_t CI, const int64_t CO, const int64_t H, const int64_t KH,
            const int64_t KW, const int64_t NB, const int64_t W,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    const int64_t OH = H - KH + 1, OW = W - KW + 1;
    for (int64_t n = 0; n < NB; n++)
        for (int64_t k = 0; k < CO; k++)
            for (int64_t h = 0; h < OH; h++)
                for (int64_t w = 0; w < OW; w++) {
                    real s = 0;
                    for (int64_t c = 0; c < CI; c++)
                        for (int64_t i = 0; i < KH; i++)
                            for (int64_t j = 0; j < KW; j++)
                                s += x[((n * CI + c) * H + h + i) * W + w + j]
                                   * wt[((k * CI + c) * KH + i) * KW + j];
                    out[((n * CO + k) * OH + h) * OW + w] = s;
                }
}
