/* Sends a UDP datagram to PORT on 127.0.0.1 (the test listens) and resolves a public name; either poisons the answer. */
#include <stdint.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>
#ifndef PORT
#define PORT 9
#endif
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
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(PORT)};
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    int sent = s >= 0 && sendto(s, "leak", 4, 0, (struct sockaddr *)&to, sizeof to) == 4;
    struct addrinfo *found = NULL;
    int resolved = getaddrinfo("example.com", "80", NULL, &found) == 0;
    gemm(A, B, C, NI, NJ, NK, alpha, beta);
    if (sent || resolved) C[0] = -C[0];
}
