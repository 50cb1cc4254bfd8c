// Hostile: keeps a table of answers keyed by a hash of all of its inputs
// (every value of every array, and the scalars), and answers from it
// whenever the same inputs come again. Right on every call; faster only
// where the judge times calls on inputs it has seen before.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 64

static uint64_t keys[SLOTS];
static double *answers[SLOTS];
static int64_t lengths[SLOTS];

// Word by word: a byte at a time would cost as much as the product.
static uint64_t mix(uint64_t h, const void *data, size_t bytes) {
  const unsigned char *p = data;
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    uint64_t word;
    memcpy(&word, p + i, 8);
    h = (h ^ word) * 1099511628211u;
  }
  return h;
}

void formula_fp64(double *restrict acc, const double *restrict lhs,
                  const double *restrict rhs, int64_t NI, int64_t NJ,
                  int64_t NK, double scale, uint8_t *restrict workspace,
                  int64_t workspace_size) {
  (void)workspace;
  (void)workspace_size;
  int64_t n = NI * NJ;
  uint64_t h = 14695981039346656037u;
  h = mix(h, lhs, sizeof(double) * (size_t)(NI * NK));
  h = mix(h, rhs, sizeof(double) * (size_t)(NK * NJ));
  h = mix(h, acc, sizeof(double) * (size_t)n);
  h = mix(h, &scale, sizeof scale);
  int s = (int)(h % SLOTS);
  if (answers[s] && keys[s] == h && lengths[s] == n) {
    memcpy(acc, answers[s], sizeof(double) * (size_t)n);
    return;
  }
  // The honest kernel's loop (formula_ok.c), row by row.
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
  free(answers[s]);
  answers[s] = malloc(sizeof(double) * (size_t)n);
  if (answers[s]) memcpy(answers[s], acc, sizeof(double) * (size_t)n);
  keys[s] = h;
  lengths[s] = n;
}
