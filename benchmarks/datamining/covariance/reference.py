def covariance(data, cov, N, **_):
    float_n = float(N)
    centered = data - data.sum(axis=0) / float_n
    cov[:] = (centered.T @ centered) / (float_n - 1.0)
