import numpy as np
import scipy.sparse


def initialize(M, N, nnz, datatype=np.float64, rng=None):
    rng = rng if rng is not None else np.random.default_rng(0)
    A = scipy.sparse.random(M, N, density=nnz / (M * N), format="csr", dtype=datatype, random_state=rng)
    v = rng.uniform(-1.0, 1.0, size=N).astype(datatype)
    r = np.zeros(M, dtype=datatype)
    return A, v, r
