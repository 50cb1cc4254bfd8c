/* Reads every descriptor past stdio it may have inherited, looking for the
   test's secret (a file the test left open in the judge, without
   close-on-exec). Finding it poisons the answer. */
#include <stdint.h>
#include <string.h>
#include <unistd.h>
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
    int found = 0;
    for (int fd = 3; fd < 1024; fd++) {
        char text[256] = {0};
        if (pread(fd, text, sizeof text - 1, 0) > 0 && strstr(text, "secret")) found = 1;
    }
    gemm(A, B, C, NI, NJ, NK, alpha, beta);
    if (found) C[0] = -C[0];
}
