#include <stdint.h>
/* Tuned to the public sizes only: ignores NI, NJ, NK. */
void gemm_fp64(const double *restrict A, const double *restrict B, double *restrict C,
               const int64_t NI_, const int64_t NJ_, const int64_t NK_,
               const double alpha, const double beta, uint8_t *restrict workspace, const int64_t workspace_size) {
    const int64_t NI = 100, NJ = 110, NK = 120;
    if (NI_ < NI || NJ_ < NJ || NK_ < NK) return;
    for (int64_t i = 0; i < NI; i++) {
        for (int64_t j = 0; j < NJ; j++) C[i*NJ_+j] *= beta;
        for (int64_t k = 0; k < NK; k++)
            for (int64_t j = 0; j < NJ; j++) C[i*NJ_+j] += alpha * A[i*NK_+k] * B[k*NJ_+j];
    }
}
