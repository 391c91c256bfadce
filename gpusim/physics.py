"""Physics every simulated result must obey; a result that breaks it is ``unphysical``, never ok.

``violations`` lists what a result breaks: a negative, NaN or infinite number; a time below a
roofline bound of the config it ran on (its FLOPs at the peak rate, its DRAM bytes at the peak
bandwidth); a utilisation above 1. ``UTIL_TOL`` allows rounding in the model's bookkeeping.
"""
from __future__ import annotations

import math

UTIL_TOL = 0.02          # a utilisation may exceed 1 by this much (rounding), never more


def _bad(x) -> bool:
    return x is None or not math.isfinite(x) or x < 0


def violations(r) -> list[str]:
    """What ``r`` (a simulated Result) breaks; empty when it is physical."""
    out = []
    numbers = {"time_us": r.time_us, "dram_read_bytes": r.dram_read_bytes, "dram_write_bytes": r.dram_write_bytes,
               "l2_read_bytes": r.l2_read_bytes, "flops": r.flops}
    for name, v in numbers.items():
        if _bad(v):
            out.append(f"{name} is {v}")
    if out:
        return out
    if r.max_rel_err is not None and not math.isfinite(r.max_rel_err):
        out.append(f"max_rel_err is {r.max_rel_err}")
    t = r.time_us * 1e-6
    if r.peak_flops_per_s and r.flops / r.peak_flops_per_s > t * (1 + UTIL_TOL):
        out.append(f"time {r.time_us:.4g} us is below the compute bound "
                   f"{r.flops / r.peak_flops_per_s * 1e6:.4g} us ({r.flops:.4g} FLOP at {r.peak_flops_per_s:.4g}/s)")
    for name, u in r.utilisation().items():
        if _bad(u) or u > 1 + UTIL_TOL:
            out.append(f"{name} utilisation {u:.3g} is above 1")
    return out


def judge(r):
    """``r`` unchanged when physical (or not simulated), else the same result with status
    ``unphysical`` and the violations as its reason."""
    if r.status not in ("ok", "mismatch"):
        return r
    v = violations(r)
    if not v:
        return r
    from dataclasses import replace

    return replace(r, status="unphysical", reason="breaks physics: " + "; ".join(v))
