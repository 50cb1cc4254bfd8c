def narrow(y, x, w, q, o, u, eps):
    y[:] = x * w + q.sum(axis=1) + o + (u % 3) * eps
