#include <stdint.h>

void SYMBOL(real *restrict ex, real *restrict ey, const real *restrict fict, real *restrict hz,
            const int64_t NX, const int64_t NY, const int64_t TMAX,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    for (int64_t t = 0; t < TMAX; t++) {
        for (int64_t j = 0; j < NY; j++)
            ey[j] = fict[t];
        for (int64_t i = 1; i < NX; i++)
            for (int64_t j = 0; j < NY; j++)
                ey[i * NY + j] = ey[i * NY + j] - (real)0.5 * (hz[i * NY + j] - hz[(i - 1) * NY + j]);
        for (int64_t i = 0; i < NX; i++)
            for (int64_t j = 1; j < NY; j++)
                ex[i * NY + j] = ex[i * NY + j] - (real)0.5 * (hz[i * NY + j] - hz[i * NY + j - 1]);
        for (int64_t i = 0; i < NX - 1; i++)
            for (int64_t j = 0; j < NY - 1; j++)
                hz[i * NY + j] = hz[i * NY + j] - (real)0.7 * (ex[i * NY + j + 1] - ex[i * NY + j]
                                                              + ey[(i + 1) * NY + j] - ey[i * NY + j]);
    }
}
