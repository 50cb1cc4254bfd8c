def mvt(A, x1, x2, y_1, y_2, **_):
    x1 += A @ y_1
    x2 += A.T @ y_2
