#include <math.h>
#include <stdint.h>

void SYMBOL(real *restrict out, const real *restrict x, const int64_t C, const int64_t R,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    for (int64_t r = 0; r < R; r++) {
        const real *row = x + r * C;
        real *o = out + r * C;
        real m = row[0];
        for (int64_t c = 1; c < C; c++)
            if (row[c] > m) m = row[c];
        real s = 0;
        for (int64_t c = 0; c < C; c++) {
            o[c] = exp(row[c] - m);
            s += o[c];
        }
        for (int64_t c = 0; c < C; c++)
            o[c] /= s;
    }
}
