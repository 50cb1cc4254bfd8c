import numpy as np


def knobs(x, idx, w, z, q, bias, eps, K, scale, *, unused=0):
    picked = x[idx] * w.astype(x.dtype) + np.abs(z) * eps + q.sum(axis=1)
    x[:] = scale * picked if K > 0 else picked
    if bias:
        x += 1.0
