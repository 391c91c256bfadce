"""Reading the measured tables of a GPU config between their measured points."""
from __future__ import annotations

import math


def log2_lerp(curve: dict, x: float) -> float:
    """``curve`` (key -> value) at ``x``, linear in log2 of the key between keys; the end values
    outside them."""
    keys = sorted(curve)
    if x <= keys[0]:
        return curve[keys[0]]
    for lo, hi in zip(keys, keys[1:]):
        if x <= hi:
            w = (math.log2(x) - math.log2(lo)) / (math.log2(hi) - math.log2(lo))
            return curve[lo] + w * (curve[hi] - curve[lo])
    return curve[keys[-1]]
