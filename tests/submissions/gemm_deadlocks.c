/* Two threads that each wait for the lock the other holds. */
#include <stdint.h>
#include <pthread.h>
#include <unistd.h>
static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER, b = PTHREAD_MUTEX_INITIALIZER;
static void *other(void *arg) {
    pthread_mutex_lock(&b);
    pthread_mutex_lock(&a);
    return arg;
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
    pthread_t t;
    pthread_mutex_lock(&a);
    pthread_create(&t, NULL, other, NULL);
    sleep(1);
    pthread_mutex_lock(&b);
    pthread_join(t, NULL);
    gemm(A, B, C, NI, NJ, NK, alpha, beta);
}
