def formula(scale, acc, lhs, rhs):
    acc += scale * (lhs @ rhs)
