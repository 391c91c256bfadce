"""Parameter values no run could use, refused when a scenario is loaded (SECURITY.md, "Runs and
inputs"): the bounds by parameter name, and the cross-field rules. Used by kernel scenarios
(``sweep.scenario``) and model scenarios (``models.scenario``) alike."""
from __future__ import annotations

import math
from .errors import short as _short


# Values no run could use, refused at load (SECURITY.md, "Runs and inputs"): far beyond any real
# model or GPU, so they only catch typos and overflows (a 1e29-token sequence, a window of 1e20).
# By parameter name, for every kernel that takes one; any other integer parameter is bounded by
# int64, and a float parameter must be finite.
_SEQ = 1 << 24                   # 16,777,216 tokens: 16x the longest context a model ships
PARAM_BOUNDS = {
    "seq_len": (1, _SEQ), "kv_len": (1, _SEQ), "window": (0, _SEQ),
    "batch": (1, 1 << 20), "heads": (1, 1 << 16), "kv_heads": (0, 1 << 16), "head_dim": (1, 1 << 16),
    "num_splits": (1, 1 << 16),
    "n": (1, 1 << 40),           # elements: more than any GPU's memory holds
    "M": (1, (1 << 31) - 1), "N": (1, (1 << 31) - 1), "K": (1, (1 << 31) - 1),   # a grid dimension / int32 index
    "rows": (1, (1 << 31) - 1), "cols": (1, (1 << 31) - 1),
}
INT_BOUND = (-(1 << 63), (1 << 63) - 1)


def bound_problem(name: str, val) -> str | None:
    """Why ``val`` (a converted parameter value) is outside what any run could use, or None."""
    if isinstance(val, bool):
        return None
    if isinstance(val, float) and not math.isfinite(val):
        return f"{name} must be a finite number, got {val}"
    if isinstance(val, int):
        lo, hi = PARAM_BOUNDS.get(name, INT_BOUND)
        if not lo <= val <= hi:
            return (f"{name} = {_short(val, 40)} is outside the range a run can use, {lo:,} .. {hi:,}"
                    if name in PARAM_BOUNDS else f"{name} = {_short(val, 40)} does not fit a 64-bit integer")
    return None


def cross_problem(params: dict) -> tuple | None:
    """(field, why) when a point's resolved parameters together describe no run, or None: K/V
    heads that do not divide the query heads (each K/V head serves heads / kv_heads of them)."""
    h, kv = params.get("heads"), params.get("kv_heads")
    if isinstance(h, int) and isinstance(kv, int) and kv > 0 and h % kv:
        return "kv_heads", f"kv_heads = {kv} must divide heads = {h} (0: one K/V head per query head)"
    return None
