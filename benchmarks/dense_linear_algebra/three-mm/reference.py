def three_mm(A, B, C, D, G, **_):
    E = A @ B
    F = C @ D
    G[:] = E @ F
