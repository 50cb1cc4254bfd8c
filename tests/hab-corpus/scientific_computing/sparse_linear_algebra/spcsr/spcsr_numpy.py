def spcsr(A, v, r):
    r[:] = A @ v
