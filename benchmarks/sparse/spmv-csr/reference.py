import numpy as np


def spmv_csr(vals, cols, x, y, **_):
    y[:] = np.einsum("ik,ik->i", vals, x[cols])
