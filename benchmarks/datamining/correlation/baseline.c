#include <math.h>
#include <stdint.h>

void SYMBOL(real *restrict corr, const real *restrict data, const int64_t M, const int64_t N,
            const real eps, uint8_t *restrict workspace, const int64_t workspace_size)
{
    const real float_n = (real)N;
    real *restrict mean = (real *)workspace;
    real *restrict stddev = mean + M;
    real *restrict x = stddev + M;
    for (int64_t j = 0; j < M; j++) {
        mean[j] = 0;
        for (int64_t i = 0; i < N; i++)
            mean[j] += data[i * M + j];
        mean[j] /= float_n;
    }
    for (int64_t j = 0; j < M; j++) {
        stddev[j] = 0;
        for (int64_t i = 0; i < N; i++)
            stddev[j] += (data[i * M + j] - mean[j]) * (data[i * M + j] - mean[j]);
        stddev[j] /= float_n;
        stddev[j] = sqrt(stddev[j]);
        /* A near-zero standard deviation would divide by zero below. */
        stddev[j] = stddev[j] <= eps ? (real)1.0 : stddev[j];
    }
    /* Center and reduce the column vectors. */
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < M; j++) {
            x[i * M + j] = data[i * M + j] - mean[j];
            x[i * M + j] /= sqrt(float_n) * stddev[j];
        }
    /* The M x M correlation matrix. */
    for (int64_t i = 0; i < M - 1; i++) {
        corr[i * M + i] = 1;
        for (int64_t j = i + 1; j < M; j++) {
            corr[i * M + j] = 0;
            for (int64_t k = 0; k < N; k++)
                corr[i * M + j] += x[k * M + i] * x[k * M + j];
            corr[j * M + i] = corr[i * M + j];
        }
    }
    corr[(M - 1) * M + M - 1] = 1;
}
