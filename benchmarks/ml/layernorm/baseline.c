#include <math.h>
#include <stdint.h>

void SYMBOL(const real *restrict beta, const real *restrict gamma, real *restrict out,
            const real *restrict x, const int64_t C, const int64_t R, const real eps,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    for (int64_t r = 0; r < R; r++) {
        const real *row = x + r * C;
        double mean = 0, var = 0;
        for (int64_t c = 0; c < C; c++)
            mean += row[c];
        mean /= C;
        for (int64_t c = 0; c < C; c++)
            var += (row[c] - mean) * (row[c] - mean);
        var /= C;
        const double inv = 1.0 / sqrt(var + eps);
        for (int64_t c = 0; c < C; c++)
            out[r * C + c] = (real)((row[c] - mean) * inv) * gamma[c] + beta[c];
    }
}
