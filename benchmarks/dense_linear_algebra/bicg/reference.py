def bicg(A, p, r, q, s, **_):
    s[:] = A.T @ r
    q[:] = A @ p
