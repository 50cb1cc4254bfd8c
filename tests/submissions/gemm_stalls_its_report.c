/* While its library loads, writes the start of a report frame on the
   runner's report channel (a header length, then one byte of a header
   that never comes) and sleeps: a supervisor reading that frame without a
   deadline would wait for ever. The kernel is honest. */
#include <stdint.h>
#include <unistd.h>

__attribute__((constructor)) static void stall(void) {
    write(3, "\x10\x00\x00\x00{", 5);
    for (;;) pause();
}

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
