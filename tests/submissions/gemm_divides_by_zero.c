/* An integer division by zero: SIGFPE on x86 and most CPUs that trap it. */
#include <stdint.h>
#include <signal.h>
void gemm_fp64(const double *restrict A, const double *restrict B, double *restrict C,
               const int64_t NI, const int64_t NJ, const int64_t NK,
               const double alpha, const double beta, uint8_t *restrict workspace, const int64_t workspace_size) {
    /* Both volatile: gcc turns 1 / x into a comparison that never traps. */
    volatile int one = 1, zero = 0;
    C[0] = one / zero;
#if !defined(__x86_64__) && !defined(__i386__)
    raise(SIGFPE); /* ARM does not trap integer division */
#endif
}
