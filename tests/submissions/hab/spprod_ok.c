// HPCAgent-Bench fixture `spprod` (COO configuration): r = S v.
#include <stdint.h>

void spprod_coo_fp64(const int64_t *restrict S_cols, const int64_t *restrict S_rows,
                     const double *restrict S_vals, double *restrict r,
                     const double *restrict v, int64_t M, int64_t N, int64_t nnz,
                     uint8_t *restrict workspace, int64_t workspace_size) {
  (void)N;
  (void)workspace;
  (void)workspace_size;
  for (int64_t i = 0; i < M; i++) r[i] = 0.0;
  for (int64_t k = 0; k < nnz; k++) r[S_rows[k]] += S_vals[k] * v[S_cols[k]];
}
