/* In a profiled run: opens a TCP listener on its own loopback and connects
 * to it (a profiler's library does as much), connects to TCP PORT on
 * 127.0.0.1 (the test listens there, outside the run's network: a
 * connection poisons the answer), and tries a Unix socket. Says what it
 * found on stdout, once. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
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
static const char *own_loopback(void) {
    struct sockaddr_in at = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &at.sin_addr);
    socklen_t size = sizeof at;
    int server = socket(AF_INET, SOCK_STREAM, 0);
    if (server < 0) return strerror(errno);
    if (bind(server, (struct sockaddr *)&at, sizeof at) != 0 || listen(server, 1) != 0
        || getsockname(server, (struct sockaddr *)&at, &size) != 0) return strerror(errno);
    int client = socket(AF_INET, SOCK_STREAM, 0);
    if (client < 0 || connect(client, (struct sockaddr *)&at, sizeof at) != 0) return strerror(errno);
    int accepted = accept(server, NULL, NULL);
    if (accepted < 0 || write(client, "x", 1) != 1) return strerror(errno);
    char byte = 0;
    if (read(accepted, &byte, 1) != 1 || byte != 'x') return "no byte";
    close(accepted); close(client); close(server);
    return "ok";
}
void gemm_fp64(const double *restrict A, const double *restrict B, double *restrict C,
               const int64_t NI, const int64_t NJ, const int64_t NK,
               const double alpha, const double beta, uint8_t *restrict workspace, const int64_t workspace_size) {
    static int said = 0;
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(PORT)};
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    int connected = s >= 0 && connect(s, (struct sockaddr *)&to, sizeof to) == 0;
    if (connected) write(s, "leak", 4);
    if (s >= 0) close(s);
    if (!said) {
        said = 1;
        int unix_socket = socket(AF_UNIX, SOCK_STREAM, 0);
        printf("loopback: %s\nunix: %s\noutside: %s\n", own_loopback(),
               unix_socket < 0 ? strerror(errno) : "made", connected ? "connected" : "unreachable");
        fflush(stdout);
    }
    gemm(A, B, C, NI, NJ, NK, alpha, beta);
    if (connected) C[0] = -C[0];
}
