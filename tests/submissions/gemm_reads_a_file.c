/* Reads TARGET (a file, or every file of a directory); anything read poisons the answer. */
#include <stdint.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#ifndef TARGET
#define TARGET "/etc/shadow"
#endif
static long slurp(const char *path) {
    char buf[4096];
    long got = 0, n;
    int fd = open(path, O_RDONLY);
    while (fd >= 0 && (n = read(fd, buf, sizeof buf)) > 0) got += n;
    return got;
}
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
    long got = slurp(TARGET);
    DIR *d = opendir(TARGET);
    struct dirent *e;
    char path[4096];
    while (d && (e = readdir(d))) {
        snprintf(path, sizeof path, "%s/%s", TARGET, e->d_name);
        if (e->d_name[0] != '.') got += slurp(path);
        DIR *sub = opendir(path);
        struct dirent *f;
        while (sub && e->d_name[0] != '.' && (f = readdir(sub))) {
            char inner[8192];
            snprintf(inner, sizeof inner, "%s/%s", path, f->d_name);
            got += slurp(inner);
        }
    }
    gemm(A, B, C, NI, NJ, NK, alpha, beta);
    if (got > 0) C[0] = -C[0];
}
