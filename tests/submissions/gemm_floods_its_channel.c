/* From a static initializer, starts a thread that writes "call done" bytes
   (and garbage) to every descriptor past stdio without end, so that the
   runner's channel says each call is over as soon as it starts; the kernel
   itself is honest. The old judge timed calls inside the runner, which a
   submission could rewrite; now only the supervisor's clock counts, and an
   early "done" only stops the call early, with its outputs unfinished. */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
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
static void *flood(void *unused) {
    (void)unused;
    for (int fd = 3; fd < 64; fd++) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    for (;;)
        for (int fd = 3; fd < 64; fd++) write(fd, "DDDD\x01\x00\x00\x00{", 9);
    return 0;
}
__attribute__((constructor)) static void start(void) {
    pthread_t thread;
    pthread_create(&thread, 0, flood, 0);
}
void gemm_fp64(const double *restrict A, const double *restrict B, double *restrict C,
               const int64_t NI, const int64_t NJ, const int64_t NK,
               const double alpha, const double beta, uint8_t *restrict workspace, const int64_t workspace_size) {
    gemm(A, B, C, NI, NJ, NK, alpha, beta);
}
