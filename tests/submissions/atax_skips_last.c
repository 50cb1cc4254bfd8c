#include <stdint.h>
/* Computes y correctly but never writes its last element. */
void atax_fp64(const double *restrict A, const double *restrict x, double *restrict y,
               const int64_t M, const int64_t N, uint8_t *restrict workspace, const int64_t workspace_size) {
    for (int64_t j = 0; j < N - 1; j++) y[j] = 0;
    for (int64_t i = 0; i < M; i++) {
        double t = 0;
        for (int64_t j = 0; j < N; j++) t += A[i * N + j] * x[j];
        for (int64_t j = 0; j < N - 1; j++) y[j] += A[i * N + j] * t;
    }
}
