import numpy as np


def softmax(x, out, **_):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    out[:] = e / e.sum(axis=1, keepdims=True)
