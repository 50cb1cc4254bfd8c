import numpy as np


def initialize(M, N, nnz, datatype=np.float64, rng=None):
    rng = rng if rng is not None else np.random.default_rng(0)
    rows = rng.integers(0, M, size=nnz, dtype=np.int64)
    cols = rng.integers(0, N, size=nnz, dtype=np.int64)
    vals = rng.uniform(-1.0, 1.0, size=nnz).astype(datatype)
    v = rng.uniform(-1.0, 1.0, size=N).astype(datatype)
    r = np.zeros(M, dtype=datatype)
    return rows, cols, vals, v, r
