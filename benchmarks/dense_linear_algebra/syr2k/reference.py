import numpy as np


def syr2k(A, B, C, alpha, beta, **_):
    lower = np.tril_indices(C.shape[0])
    C[lower] = (alpha * (A @ B.T) + alpha * (B @ A.T) + beta * C)[lower]
