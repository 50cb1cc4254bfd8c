import numpy as np


def adi(u, TSTEPS, **_):
    n = u.shape[0]
    if n < 3:
        return
    DX = 1.0 / n
    DY = 1.0 / n
    DT = 1.0 / TSTEPS
    B1, B2 = 2.0, 1.0
    mul1 = B1 * DT / (DX * DX)
    mul2 = B2 * DT / (DY * DY)
    a = -mul1 / 2.0
    b = 1.0 + mul1
    c = a
    d = -mul2 / 2.0
    e = 1.0 + mul2
    f = d

    # p (and the denominators) are the same for every line and every step.
    pc = np.zeros(n - 1)
    pr = np.zeros(n - 1)
    den_c = np.zeros(n - 1)
    den_r = np.zeros(n - 1)
    for j in range(1, n - 1):
        den_c[j] = a * pc[j - 1] + b
        pc[j] = -c / den_c[j]
        den_r[j] = d * pr[j - 1] + e
        pr[j] = -f / den_r[j]

    m = n - 2
    q = np.empty((n - 1, m))   # q[j, i - 1]
    v = np.zeros((n, n))       # v[j, i], as in the C code
    ut = np.empty((n, m))      # ut[j, i - 1] = u[i][j]
    for _ in range(TSTEPS):
        # Column sweep: lines are columns i of v, vectorized over i.
        q[0] = 1.0
        for j in range(1, n - 1):
            q[j] = (-d * u[j, :-2] + (1.0 + 2.0 * d) * u[j, 1:-1] - f * u[j, 2:] - a * q[j - 1]) / den_c[j]
        v[0, 1:-1] = 1.0
        v[n - 1, 1:-1] = 1.0
        for j in range(n - 2, 0, -1):
            v[j, 1:-1] = pc[j] * v[j + 1, 1:-1] + q[j]
        # Row sweep: lines are rows i of u, vectorized over i.
        vt = np.ascontiguousarray(v.T)   # vt[j, i] = v[i][j]
        q[0] = 1.0
        for j in range(1, n - 1):
            q[j] = (-a * vt[j, :-2] + (1.0 + 2.0 * a) * vt[j, 1:-1] - c * vt[j, 2:] - d * q[j - 1]) / den_r[j]
        ut[0] = 1.0
        ut[n - 1] = 1.0
        for j in range(n - 2, 0, -1):
            ut[j] = pr[j] * ut[j + 1] + q[j]
        u[1:-1, :] = ut.T
