#include <stdint.h>

void SYMBOL(real *restrict cov, const real *restrict data, const int64_t M, const int64_t N,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    const real float_n = (real)N;
    real *restrict mean = (real *)workspace;
    real *restrict centered = mean + M;
    for (int64_t j = 0; j < M; j++) {
        mean[j] = 0;
        for (int64_t i = 0; i < N; i++)
            mean[j] += data[i * M + j];
        mean[j] /= float_n;
    }
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < M; j++)
            centered[i * M + j] = data[i * M + j] - mean[j];
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = i; j < M; j++) {
            cov[i * M + j] = 0;
            for (int64_t k = 0; k < N; k++)
                cov[i * M + j] += centered[k * M + i] * centered[k * M + j];
            cov[i * M + j] /= (float_n - (real)1.0);
            cov[j * M + i] = cov[i * M + j];
        }
}
