import numpy as np


def dot(x, y, out, **_):
    out[0] = np.dot(x, y)
