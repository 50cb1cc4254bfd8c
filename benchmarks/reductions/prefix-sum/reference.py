import numpy as np


def prefix_sum(x, y, **_):
    np.cumsum(x, out=y)
