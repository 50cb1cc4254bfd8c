import numpy as np


def batchnorm(x, mean, var, gamma, beta, out, eps, **_):
    c = (slice(None), None, None)  # broadcast a per-channel vector over H and W
    out[:] = (x - mean[c]) / np.sqrt(var[c] + eps) * gamma[c] + beta[c]
