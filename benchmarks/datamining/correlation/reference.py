import numpy as np


def correlation(data, corr, eps, N, **_):
    float_n = float(N)
    mean = data.sum(axis=0) / float_n
    stddev = np.sqrt(((data - mean) ** 2).sum(axis=0) / float_n)
    stddev = np.where(stddev <= eps, 1.0, stddev)
    normalized = (data - mean) / (np.sqrt(float_n) * stddev)
    corr[:] = normalized.T @ normalized
    np.fill_diagonal(corr, 1.0)
