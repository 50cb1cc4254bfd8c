#include <cstdint>
extern "C" void gemm_fp64(const double *__restrict__ A, const double *__restrict__ B, double *__restrict__ C,
                          const int64_t NI, const int64_t NJ, const int64_t NK,
                          const double alpha, const double beta, uint8_t *__restrict__ workspace, const int64_t workspace_size) {
    for (int64_t i = 0; i < NI; i++) {
        for (int64_t j = 0; j < NJ; j++) C[i*NJ+j] *= beta;
        for (int64_t k = 0; k < NK; k++)
            for (int64_t j = 0; j < NJ; j++) C[i*NJ+j] += alpha * A[i*NK+k] * B[k*NJ+j];
    }
}
