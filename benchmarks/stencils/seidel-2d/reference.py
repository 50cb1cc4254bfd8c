import numpy as np


def seidel_2d(A, TSTEPS, **_):
    # Row i of step t needs row i-1 of step t and rows i, i+1 of step t-1, so
    # the rows with the same i + 2t are independent: sweep those wavefronts in
    # order, all their rows at once, and run the recurrence along j per column.
    n = A.shape[0]
    inner = n - 2
    if inner < 1 or TSTEPS < 1:
        return
    for w in range(1, inner + 2 * (TSTEPS - 1) + 1):
        t_lo = max(0, -((inner - w) // 2))
        t_hi = min(TSTEPS - 1, (w - 1) // 2)
        rows = w - 2 * np.arange(t_lo, t_hi + 1)
        up, mid, dn = A[rows - 1], A[rows], A[rows + 1]
        # Every term except the new A[i][j-1].
        rest = (up[:, :-2] + up[:, 1:-1] + up[:, 2:] + mid[:, 1:-1] + mid[:, 2:]
                + dn[:, :-2] + dn[:, 1:-1] + dn[:, 2:])
        rest = np.ascontiguousarray(rest.T)
        out = np.empty_like(rest)
        x = mid[:, 0].copy()
        for j in range(inner):
            np.add(rest[j], x, out=x)
            np.divide(x, 9.0, out=x)
            out[j] = x
        A[rows, 1:-1] = out.T
