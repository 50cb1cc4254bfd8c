#include <math.h>
#include <stdint.h>

void SYMBOL(const real *restrict K, real *restrict O, const real *restrict Q, const real *restrict V,
            const int64_t D, const int64_t N,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    double *p = (double *)workspace; /* one row of scores at a time */
    const double scale = 1.0 / sqrt((double)D);
    for (int64_t i = 0; i < N; i++) {
        const real *q = Q + i * D;
        double m = -INFINITY;
        for (int64_t j = 0; j < N; j++) {
            const real *k = K + j * D;
            double s = 0;
            for (int64_t d = 0; d < D; d++)
                s += (double)q[d] * (double)k[d];
            p[j] = s * scale;
            if (p[j] > m) m = p[j];
        }
        double sum = 0;
        for (int64_t j = 0; j < N; j++) {
            p[j] = exp(p[j] - m);
            sum += p[j];
        }
        real *o = O + i * D;
        for (int64_t d = 0; d < D; d++)
            o[d] = 0;
        for (int64_t j = 0; j < N; j++) {
            const real w = (real)(p[j] / sum);
            const real *v = V + j * D;
            for (int64_t d = 0; d < D; d++)
                o[d] += w * v[d];
        }
    }
}
