def two_mm(A, B, C, D, alpha, beta, **_):
    tmp = alpha * (A @ B)
    D[:] = tmp @ C + beta * D
