def conv_2d(A, B, **_):
    c11, c21, c31 = 0.2, 0.5, -0.8
    c12, c22, c32 = -0.3, 0.6, -0.9
    c13, c23, c33 = 0.4, 0.7, 0.10
    ni, nj = A.shape
    if ni < 3 or nj < 3:
        return
    rows = max(1, (1 << 21) // nj)  # bound the temporaries
    for i0 in range(1, ni - 1, rows):
        i1 = min(ni - 1, i0 + rows)
        up, mid, dn = A[i0 - 1:i1 - 1], A[i0:i1], A[i0 + 1:i1 + 1]
        B[i0:i1, 1:-1] = (c11 * up[:, :-2] + c12 * mid[:, :-2] + c13 * dn[:, :-2]
                          + c21 * up[:, 1:-1] + c22 * mid[:, 1:-1] + c23 * dn[:, 1:-1]
                          + c31 * up[:, 2:] + c32 * mid[:, 2:] + c33 * dn[:, 2:])
