import numpy as np


def histogram(x, counts, BINS, **_):
    counts[:] = np.bincount(x, minlength=BINS)
