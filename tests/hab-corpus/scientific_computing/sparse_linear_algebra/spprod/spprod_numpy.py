import numpy as np


def spprod(S_vals, S_rows, S_cols, v, r):
    r[:] = 0.0
    np.add.at(r, S_rows, S_vals * v[S_cols])
