def shift(a, b, LEN):
    for i in range(1, LEN):
        a[i] = a[i - 1] + b[i]
