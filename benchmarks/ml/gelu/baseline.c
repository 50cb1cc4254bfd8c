#include <math.h>
#include <stdint.h>

void SYMBOL(const real *restrict x, real *restrict y, const int64_t N,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    const double c = 0.7978845608028654; /* sqrt(2 / pi) */
    for (int64_t i = 0; i < N; i++) {
        const double v = x[i];
        y[i] = (real)(0.5 * v * (1.0 + tanh(c * (v + 0.044715 * v * v * v))));
    }
}
