def masked(y, x, idx, mask, bias):
    y[:] = x[idx] * (mask % 2) + (1.0 if bias else 0.0)
