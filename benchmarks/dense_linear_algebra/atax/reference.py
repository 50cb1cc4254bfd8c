def atax(A, x, y, **_):
    y[:] = A.T @ (A @ x)
