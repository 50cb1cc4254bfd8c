def s1113(a, b, LEN, **_):
    h = LEN // 2
    first = a[h]
    a[: h + 1] = first + b[: h + 1]
    a[h + 1 :] = a[h] + b[h + 1 :]
