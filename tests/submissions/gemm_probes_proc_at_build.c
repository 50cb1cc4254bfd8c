/* Asks the preprocessor whether the judge's process is visible
   (`__has_include` of its /proc entry; the test defines TARGET as that
   path, default the node's init) and refuses to build if it is: a build
   error would tell an agent what runs on the node. The kernel is honest. */
#include <stdint.h>
#ifndef TARGET
#define TARGET "/proc/1/environ"
#endif
#if __has_include(TARGET)
#error "the judge's process is visible to the compiler"
#endif
void gemm_fp64(const double *restrict A, const double *restrict B, double *restrict C,
               const int64_t NI, const int64_t NJ, const int64_t NK,
               const double alpha, const double beta, uint8_t *restrict workspace, const int64_t workspace_size) {
    for (int64_t i = 0; i < NI; i++) {
        for (int64_t j = 0; j < NJ; j++) C[i*NJ+j] *= beta;
        for (int64_t k = 0; k < NK; k++) {
            const double a = alpha * A[i*NK+k];
            for (int64_t j = 0; j < NJ; j++) C[i*NJ+j] += a * B[k*NJ+j];
        }
    }
}
