import numpy as np


def layernorm(x, gamma, beta, out, eps, **_):
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    out[:] = (x - mean) / np.sqrt(var + eps) * gamma + beta
