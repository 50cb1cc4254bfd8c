/* Correct, and sleeps 0.1 to 0.4 s in every call: its timed pairs never
   narrow the speedup's interval, so a grade of it holds the node's timing
   lock until its time cap. */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

void gemm_fp64(const double *restrict A, const double *restrict B, double *restrict C,
               const int64_t NI, const int64_t NJ, const int64_t NK,
               const double alpha, const double beta, uint8_t *restrict workspace, const int64_t workspace_size) {
    struct timespec pause = {0, 100000000L + rand() % 300000000L};
    nanosleep(&pause, 0);
    for (int64_t i = 0; i < NI; i++) {
        for (int64_t j = 0; j < NJ; j++) C[i*NJ+j] *= beta;
        for (int64_t k = 0; k < NK; k++) {
            const double a = alpha * A[i*NK+k];
            for (int64_t j = 0; j < NJ; j++) C[i*NJ+j] += a * B[k*NJ+j];
        }
    }
}
