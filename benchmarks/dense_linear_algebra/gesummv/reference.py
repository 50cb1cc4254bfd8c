def gesummv(A, B, x, y, alpha, beta, **_):
    y[:] = alpha * (A @ x) + beta * (B @ x)
