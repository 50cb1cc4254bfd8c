import numpy as np


def product(gain, steps, out, left, right, NJ):
    out += steps * gain * (left @ right)
