#include <math.h>
#include <stdint.h>

void SYMBOL(real *restrict out, const real *restrict x, const int64_t N,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    double s = 0;
    for (int64_t i = 0; i < N; i++)
        s += (double)x[i] * (double)x[i];
    out[0] = (real)sqrt(s);
}
