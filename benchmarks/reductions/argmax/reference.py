import numpy as np


def argmax(x, idx, **_):
    idx[0] = np.argmax(x)  # the first index of the maximum
