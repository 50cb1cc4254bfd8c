import numpy as np


def initialize(NI, NJ, NK, datatype=np.float64):
    # Every value is a function of its indices and the sizes: no seed.
    scale = datatype(0.5)
    acc = np.fromfunction(lambda i, j: ((3 * i + j) % 7) / 7.0, (NI, NJ), dtype=datatype)
    lhs = np.fromfunction(lambda i, k: ((i + 2 * k + 1) % NK) / NK, (NI, NK), dtype=datatype)
    rhs = np.fromfunction(lambda k, j: ((k * j + 3) % NJ) / NJ, (NK, NJ), dtype=datatype)
    return scale, acc, lhs, rhs
