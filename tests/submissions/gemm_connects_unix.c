/* Connects to the node's Unix sockets: a pathname one (TARGET, where the
   test listens, as a same-user tmux server would) and an abstract one
   ("\0hpcagent-bait"). Through a tmux server a run would have its commands
   run outside any sandbox. A connection poisons the answer. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#ifndef TARGET
#define TARGET "/tmp/none.sock"
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
static int reach(const char *path, size_t length) {
    struct sockaddr_un to = {.sun_family = AF_UNIX};
    memcpy(to.sun_path, path, length);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    int connected = s >= 0 && connect(s, (struct sockaddr *)&to, offsetof(struct sockaddr_un, sun_path) + length) == 0;
    if (connected) write(s, "leak", 4);
    return connected;
}
void gemm_fp64(const double *restrict A, const double *restrict B, double *restrict C,
               const int64_t NI, const int64_t NJ, const int64_t NK,
               const double alpha, const double beta, uint8_t *restrict workspace, const int64_t workspace_size) {
    int connected = reach(TARGET, sizeof TARGET);
    connected |= reach("\0hpcagent-bait", sizeof "\0hpcagent-bait" - 1);
    gemm(A, B, C, NI, NJ, NK, alpha, beta);
    if (connected) C[0] = -C[0];
}
