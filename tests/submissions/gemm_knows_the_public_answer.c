/* Knows the public case: its first input value (PUBLIC_A0_BITS) and its
   answer (PUBLIC_C), which the test read from the judge's cache and puts in
   front, as an agent could learn them from the documented generator and
   seed. It answers the public case from memory at once and computes every
   other call. The old judge timed only the public case: this made any
   speedup. Now the timed calls have inputs no one knows before the grade. */
#include <stdint.h>
#include <string.h>
#ifndef PUBLIC_C
#define PUBLIC_A0_BITS 0
#define PUBLIC_C {0}
#endif
static const double public_c[] = PUBLIC_C;
static void gemm(const double *restrict A, const double *restrict B, double *restrict C,
                 const int64_t NI, const int64_t NJ, const int64_t NK, const double alpha, const double beta) {
    for (int64_t i = 0; i < NI; i++) {
        for (int64_t j = 0; j < NJ; j++) C[i*NJ+j] *= beta;
        for (int64_t k = 0; k < NK; k++) {
            const double a = alpha * A[i*NK+k];
            for (int64_t j = 0; j < NJ; j++) C[i*NJ+j] += a * B[k*NJ+j];
        }
    }
}
void gemm_fp64(const double *restrict A, const double *restrict B, double *restrict C,
               const int64_t NI, const int64_t NJ, const int64_t NK,
               const double alpha, const double beta, uint8_t *restrict workspace, const int64_t workspace_size) {
    uint64_t first;
    memcpy(&first, A, sizeof first);
    if (first == (uint64_t)PUBLIC_A0_BITS && (size_t)(NI * NJ) == sizeof public_c / sizeof public_c[0]) {
        memcpy(C, public_c, sizeof public_c);
        return;
    }
    gemm(A, B, C, NI, NJ, NK, alpha, beta);
}
