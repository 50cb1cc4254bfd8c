/* Sets the fast-math family for itself, where the command line may not:
   a pragma made by a macro (so no text search of the source finds it) and
   an optimize attribute. The kernel is honest. */
#include <stdint.h>
#define PRAGMA(x) _Pragma(#x)
#define FAST PRAGMA(GCC optimize("fast-math"))
FAST
__attribute__((optimize("Ofast")))
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
