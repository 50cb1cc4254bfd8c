// HPCAgent-Bench fixture `spcsr`: r = A v, A in CSR buffers.
#include <stdint.h>

void spcsr_csr_fp64(const double *restrict A_data, const int64_t *restrict A_indices,
                    const int64_t *restrict A_indptr, double *restrict r,
                    const double *restrict v, int64_t M, int64_t N, int64_t nnz,
                    uint8_t *restrict workspace, int64_t workspace_size) {
  (void)N;
  (void)nnz;
  (void)workspace;
  (void)workspace_size;
  for (int64_t i = 0; i < M; i++) {
    double sum = 0.0;
    for (int64_t k = A_indptr[i]; k < A_indptr[i + 1]; k++) sum += A_data[k] * v[A_indices[k]];
    r[i] = sum;
  }
}
