/* Leaves a thread spinning on its own CPU from its first call on, to slow
   whatever runs there between its calls: the baseline's calls, which a
   slower baseline would make a speedup of. The supervisor stops every
   thread of a runner between its calls. */
#include <pthread.h>
#include <stdint.h>
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
static void *spin(void *unused) {
    volatile uint64_t x = 0;
    (void)unused;
    for (;;) x++;
    return 0;
}
void gemm_fp64(const double *restrict A, const double *restrict B, double *restrict C,
               const int64_t NI, const int64_t NJ, const int64_t NK,
               const double alpha, const double beta, uint8_t *restrict workspace, const int64_t workspace_size) {
    static int started;
    if (!started) {
        pthread_t thread;
        pthread_create(&thread, 0, spin, 0);
        started = 1;
    }
    gemm(A, B, C, NI, NJ, NK, alpha, beta);
}
