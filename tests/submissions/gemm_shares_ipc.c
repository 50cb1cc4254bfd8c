/* Reaches for state that outlives a run: a System V shared memory segment
   (0666, never removed), a semaphore set, a message queue, a POSIX queue and
   POSIX shared memory, under fixed names another run could open to replay
   answers or leak held-out inputs. Any that opens poisons the answer. */
#include <fcntl.h>
#include <mqueue.h>
#include <stdint.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <unistd.h>
#define KEY 0x48504341
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
    int reached = shmget(KEY, 1 << 20, IPC_CREAT | 0666) >= 0;
    reached |= semget(KEY, 1, IPC_CREAT | 0666) >= 0;
    reached |= msgget(KEY, IPC_CREAT | 0666) >= 0;
    reached |= mq_open("/hpcagent-replay", O_CREAT | O_RDWR, 0666, 0) != (mqd_t)-1;
    reached |= shm_open("/hpcagent-replay", O_CREAT | O_RDWR, 0666) >= 0;
    gemm(A, B, C, NI, NJ, NK, alpha, beta);
    if (reached) C[0] = -C[0];
}
