import numpy as np


def attention(Q, K, V, O, D, **_):
    s = (Q @ K.T) / np.sqrt(D)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    O[:] = p @ V
