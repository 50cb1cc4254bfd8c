#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>
/* Correct, but tries to start a detached process that spins forever (it
   must not outlive the run: it would steal the cores of every later
   timing). Runs may not start processes: it says so when fork fails. */
void gemm_fp64(const double *restrict A, const double *restrict B, double *restrict C,
               const int64_t NI, const int64_t NJ, const int64_t NK,
               const double alpha, const double beta, uint8_t *restrict workspace, const int64_t workspace_size) {
    static int started;
    pid_t child = started++ ? 1 : fork();
    if (child < 0) {
        printf("fork refused\n");
        fflush(stdout);
    }
    if (child == 0) {
        setsid();
        if (fork() == 0) {
            printf("daemon %d\n", (int)getpid());
            fflush(stdout);
            for (;;) { __asm__ volatile(""); }
        }
        _exit(0);
    }
    for (int64_t i = 0; i < NI; i++) {
        for (int64_t j = 0; j < NJ; j++) C[i*NJ+j] *= beta;
        for (int64_t k = 0; k < NK; k++)
            for (int64_t j = 0; j < NJ; j++) C[i*NJ+j] += alpha * A[i*NK+k] * B[k*NJ+j];
    }
}
