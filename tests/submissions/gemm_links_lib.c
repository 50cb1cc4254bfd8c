#include <stdint.h>
/* Calls a routine from a library installed in the shared mount. */
void scale_rows(double *C, int64_t n, double beta);
void gemm_fp64(const double *restrict A, const double *restrict B, double *restrict C,
               const int64_t NI, const int64_t NJ, const int64_t NK,
               const double alpha, const double beta, uint8_t *restrict workspace, const int64_t workspace_size) {
    scale_rows(C, NI * NJ, beta);
    for (int64_t i = 0; i < NI; i++)
        for (int64_t k = 0; k < NK; k++)
            for (int64_t j = 0; j < NJ; j++) C[i*NJ+j] += alpha * A[i*NK+k] * B[k*NJ+j];
}
