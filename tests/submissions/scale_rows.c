#include <stdint.h>
void scale_rows(double *C, int64_t n, double beta) {
    for (int64_t i = 0; i < n; i++) C[i] *= beta;
}
