import numpy as np


def gemver(A, u1, v1, u2, v2, w, x, y, z, alpha, beta, **_):
    A += np.outer(u1, v1) + np.outer(u2, v2)
    x += beta * (A.T @ y) + z
    w += alpha * (A @ x)
