#include <stdint.h>

void SYMBOL(const real *restrict A, const real *restrict B, const real *restrict C,
            const real *restrict D, real *restrict G,
            const int64_t NI, const int64_t NJ, const int64_t NK, const int64_t NL, const int64_t NM,
            uint8_t *restrict workspace, const int64_t workspace_size)
{
    real *restrict E = (real *)workspace;
    real *restrict F = E + NI * NJ;
    /* E := A*B */
    for (int64_t i = 0; i < NI; i++)
        for (int64_t j = 0; j < NJ; j++) {
            E[i * NJ + j] = 0;
            for (int64_t k = 0; k < NK; k++)
                E[i * NJ + j] += A[i * NK + k] * B[k * NJ + j];
        }
    /* F := C*D */
    for (int64_t i = 0; i < NJ; i++)
        for (int64_t j = 0; j < NL; j++) {
            F[i * NL + j] = 0;
            for (int64_t k = 0; k < NM; k++)
                F[i * NL + j] += C[i * NM + k] * D[k * NL + j];
        }
    /* G := E*F */
    for (int64_t i = 0; i < NI; i++)
        for (int64_t j = 0; j < NL; j++) {
            G[i * NL + j] = 0;
            for (int64_t k = 0; k < NJ; k++)
                G[i * NL + j] += E[i * NJ + k] * F[k * NL + j];
        }
}
