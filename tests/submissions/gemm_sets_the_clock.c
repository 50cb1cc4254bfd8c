/* Sets the wall clock (to its own value) and tries to slow the monotonic one; success poisons the answer. */
#include <stdint.h>
#include <sys/time.h>
#include <time.h>
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
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int set = clock_settime(CLOCK_REALTIME, &now) == 0;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    set |= settimeofday(&tv, NULL) == 0;
    set |= clock_settime(CLOCK_MONOTONIC, &now) == 0;
    gemm(A, B, C, NI, NJ, NK, alpha, beta);
    if (set) C[0] = -C[0];
}
