#include <math.h>
#include <stdint.h>

void SYMBOL(const real *restrict beta, const real *restrict gamma, const real *restrict mean,
            real *restrict out, const real *restrict var, const real *restrict x,
            const int64_t C, const int64_t H, const int64_t NB, const int64_t W, const real eps,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    const int64_t HW = H * W;
    for (int64_t n = 0; n < NB; n++)
        for (int64_t c = 0; c < C; c++) {
            const real inv = (real)(1.0 / sqrt((double)var[c] + (double)eps));
            const real *in = x + (n * C + c) * HW;
            real *o = out + (n * C + c) * HW;
            for (int64_t i = 0; i < HW; i++)
                o[i] = (in[i] - mean[c]) * inv * gamma[c] + beta[c];
        }
}
