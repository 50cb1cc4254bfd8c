#include <stdint.h>

void SYMBOL(const real *restrict A, const real *restrict p, real *restrict q,
            const real *restrict r, real *restrict s, const int64_t M, const int64_t N,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    for (int64_t j = 0; j < M; j++)
        s[j] = 0;
    for (int64_t i = 0; i < N; i++) {
        q[i] = 0;
        for (int64_t j = 0; j < M; j++) {
            s[j] = s[j] + r[i] * A[i * M + j];
            q[i] = q[i] + A[i * M + j] * p[j];
        }
    }
}
