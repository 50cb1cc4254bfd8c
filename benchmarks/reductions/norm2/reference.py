import numpy as np


def norm2(x, out, **_):
    out[0] = np.sqrt(np.dot(x, x))
