import numpy as np


def symm(A, B, C, alpha, beta, **_):
    S = np.tril(A) + np.tril(A, -1).T
    C[:] = alpha * (S @ B) + beta * C
