#include <stdint.h>
#include <time.h>
/* Correct, and 100 ms slower a call than it needs to be: a grade with a
   short time cap fits only a few of its pairs. The delay is read off the
   clock (the vDSO's, no system call), not counted in loop turns: a
   volatile loop of 400 million turns took 0.1 s on one machine and 1 s on
   another, past the 0.5 s a call may take beside this baseline. */
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void gemm_fp64(const double *restrict A, const double *restrict B, double *restrict C,
               const int64_t NI, const int64_t NJ, const int64_t NK,
               const double alpha, const double beta, uint8_t *restrict workspace, const int64_t workspace_size) {
    const double until = now() + 0.1;
    while (now() < until) {
    }
    for (int64_t i = 0; i < NI; i++) {
        for (int64_t j = 0; j < NJ; j++) C[i*NJ+j] *= beta;
        for (int64_t k = 0; k < NK; k++) {
            const double a = alpha * A[i*NK+k];
            for (int64_t j = 0; j < NJ; j++) C[i*NJ+j] += a * B[k*NJ+j];
        }
    }
}
