/* Recurses without end until the stack is gone. */
#include <stdint.h>
static double deep(int64_t n) {
    volatile char frame[4096];
    frame[0] = (char)n;
    return deep(n + 1) + frame[0];
}
void gemm_fp64(const double *restrict A, const double *restrict B, double *restrict C,
               const int64_t NI, const int64_t NJ, const int64_t NK,
               const double alpha, const double beta, uint8_t *restrict workspace, const int64_t workspace_size) {
    C[0] = deep(NI);
}
