#include <stdint.h>

void SYMBOL(real *restrict u, const int64_t N, const int64_t TSTEPS,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    /* v, p and q: N x N scratch each, in the workspace. */
    real *restrict v = (real *)workspace;
    real *restrict p = v + N * N;
    real *restrict q = p + N * N;

    const real DX = (real)1.0 / (real)N;
    const real DY = (real)1.0 / (real)N;
    const real DT = (real)1.0 / (real)TSTEPS;
    const real B1 = (real)2.0;
    const real B2 = (real)1.0;
    const real mul1 = B1 * DT / (DX * DX);
    const real mul2 = B2 * DT / (DY * DY);

    const real a = -mul1 / (real)2.0;
    const real b = (real)1.0 + mul1;
    const real c = a;
    const real d = -mul2 / (real)2.0;
    const real e = (real)1.0 + mul2;
    const real f = d;

    for (int64_t t = 1; t <= TSTEPS; t++) {
        /* Column sweep */
        for (int64_t i = 1; i < N - 1; i++) {
            v[0 * N + i] = (real)1.0;
            p[i * N + 0] = (real)0.0;
            q[i * N + 0] = v[0 * N + i];
            for (int64_t j = 1; j < N - 1; j++) {
                p[i * N + j] = -c / (a * p[i * N + j - 1] + b);
                q[i * N + j] = (-d * u[j * N + i - 1] + ((real)1.0 + (real)2.0 * d) * u[j * N + i]
                                - f * u[j * N + i + 1] - a * q[i * N + j - 1])
                               / (a * p[i * N + j - 1] + b);
            }
            v[(N - 1) * N + i] = (real)1.0;
            for (int64_t j = N - 2; j >= 1; j--)
                v[j * N + i] = p[i * N + j] * v[(j + 1) * N + i] + q[i * N + j];
        }
        /* Row sweep */
        for (int64_t i = 1; i < N - 1; i++) {
            u[i * N + 0] = (real)1.0;
            p[i * N + 0] = (real)0.0;
            q[i * N + 0] = u[i * N + 0];
            for (int64_t j = 1; j < N - 1; j++) {
                p[i * N + j] = -f / (d * p[i * N + j - 1] + e);
                q[i * N + j] = (-a * v[(i - 1) * N + j] + ((real)1.0 + (real)2.0 * a) * v[i * N + j]
                                - c * v[(i + 1) * N + j] - d * q[i * N + j - 1])
                               / (d * p[i * N + j - 1] + e);
            }
            u[i * N + N - 1] = (real)1.0;
            for (int64_t j = N - 2; j >= 1; j--)
                u[i * N + j] = p[i * N + j] * u[i * N + j + 1] + q[i * N + j];
        }
    }
}
