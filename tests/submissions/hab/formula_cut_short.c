// Hostile, HPCAgent-Bench fixture `formula`: cuts a batch of timed calls
// short. Its first timed call (the second of its process: the public case
// is the first) computes its answer and then writes the runner's "call
// returned" byte itself on the runner's report channel (descriptor 3),
// which stops the batch's clock there; every later call returns at once.
// Timed as a batch, its clock reads one call's work for five; only its
// other sets' outputs, still holding the judge's canaries, give it away.
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

static long calls;

void formula_fp64(double *restrict acc, const double *restrict lhs,
                  const double *restrict rhs, int64_t NI, int64_t NJ,
                  int64_t NK, double scale, uint8_t *restrict workspace,
                  int64_t workspace_size) {
  (void)workspace;
  (void)workspace_size;
  if (++calls > 2) return;
  double *row = malloc(sizeof(double) * (size_t)NJ);
  if (!row) abort();
  for (int64_t i = 0; i < NI; i++) {
    for (int64_t j = 0; j < NJ; j++) row[j] = 0.0;
    for (int64_t k = 0; k < NK; k++) {
      double a = lhs[i * NK + k];
      for (int64_t j = 0; j < NJ; j++) row[j] += a * rhs[k * NJ + j];
    }
    for (int64_t j = 0; j < NJ; j++) acc[i * NJ + j] += scale * row[j];
  }
  free(row);
  if (calls == 2) {
    ssize_t written = write(3, "D", 1);
    (void)written;
  }
}
