/* Starts processes: a fork (whose child would outlive the call), and a
   program (/bin/true through execve in the fork, and system()). Any that
   starts poisons the answer: a run may have threads, not processes. */
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
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
    int started = 0;
    pid_t child = fork();
    if (child == 0) {
        char *argv[] = {"true", 0};
        execve("/bin/true", argv, 0);
        _exit(0);
    }
    if (child > 0) {
        started = 1;
        waitpid(child, 0, 0);
    }
    started |= system("true") == 0;
    gemm(A, B, C, NI, NJ, NK, alpha, beta);
    if (started) C[0] = -C[0];
}
