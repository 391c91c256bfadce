"""The calibration layer: a learned correction of the mechanistic time, per GPU, with conformal
intervals (``model``), over the simulator's own breakdown (``features``).

``apply(result, cfg)`` returns the result with ``time_us`` calibrated, ``time_us_sim`` the
mechanistic time, ``calibration`` naming what was applied and ``calibration_factor`` the factor:

- ``fitted``: ``cfg`` is a named config with its own recorded points, unchanged (its hash is the
  one the calibration was fitted with);
- ``transferred``: any other config (a100, a what-if of a named config, a new file): the model over
  the structure features alone, which no GPU resource changes, with the interval that cross-GPU
  validation measured;
- ``..., extrapolated`` added when the point lies outside the training range: the correction
  halved toward the mechanistic time and the interval widened;
- ``off``: asked for (``calibration="off"``), or no calibration file is shipped.

``calibration="transferred"`` asks for the transferred model on any config: a what-if sweep
(``gpu.<field>`` overrides) runs every point so, its unchanged point included, so the points of
one sweep share one factor and order as their mechanistic times do.

The calibrated time (and its interval's low end) never goes below what the mechanistic breakdown's
busiest resource needs (its busy share of the mechanistic time), the compute bound, nor its launch
and synchronisation overheads (``overheads``), so no calibrated time is faster than physics allows.
"""
from __future__ import annotations

import math
from dataclasses import replace

from . import features as F
from .model import clamp_factor, correct, family, load

MODES = ("on", "off", "transferred")


def check_mode(mode) -> None:
    if mode not in MODES:
        raise ValueError(f"calibration must be 'on', 'off' or 'transferred', got {mode!r}")


def overheads(b: dict) -> float:
    """The part of a breakdown's mechanistic time no correction may remove: until its last launch's
    CTAs start (the launch overheads) plus the synchronisation after it."""
    last = max(b["kernels"], key=lambda k: float(k.get("start_us") or 0.0))
    run_us = float(last["cycles"]) / float(last.get("clock_hz") or b["clock_hz"]) * 1e6
    return max(0.0, float(b["time_us"]) - run_us)


def apply_breakdown(b: dict, params: dict, kernel: str, gpu: str, cal: dict, fitted: bool = True) -> dict:
    """The calibrated time of one breakdown record: {time_us, lo, hi, factor, label}."""
    t_sim = b["time_us"]
    feats = F.features(b, params)
    fam = family(kernel)
    limits = cal["gpus"].get(gpu) if fitted else None
    label = "fitted" if limits is not None else "transferred"
    model = cal["fitted"] if limits is not None else cal["transferred"]
    g, (qlo, qhi), out = correct(model, limits or cal["transferred"], feats, fam)
    g = clamp_factor(g, cal.get("limit_log", math.log(4.0)))
    u = b.get("utilisation") or {}
    floor = max([u.get("pipe", 0.0), u.get("dram", 0.0), u.get("l2", 0.0)] +
                [b["flops"] / b["peak_flops_per_s"] / (t_sim * 1e-6) if b.get("peak_flops_per_s") else 0.0])
    least = overheads(b)
    t = max(t_sim * max(math.exp(g), floor), least)
    return {"time_us": t, "lo": max(t * math.exp(qlo), least), "hi": t * math.exp(qhi), "factor": t / t_sim,
            "label": label + (", extrapolated" if out else ""), "family": fam}


def is_fitted(cfg, cal: dict) -> bool:
    """``cfg`` is a named config the calibration was fitted for, unchanged."""
    g = cal["gpus"].get(cfg.name)
    return g is not None and g.get("config_hash") == cfg.config_hash()


def apply(r, cfg, mode: str = "on", workload=None):
    """``r`` with its time calibrated (see the module docstring); unchanged unless ``r`` is ok."""
    check_mode(mode)
    if r.status not in ("ok", "mismatch") or not r.time_us:
        return r
    cal = load() if mode != "off" and not cfg.name.endswith("-ideal") else None   # a bound stays a bound
    if cal is None:
        return replace(r, time_us_sim=r.time_us, calibration="off", calibration_factor=1.0)
    fitted = mode == "on" and is_fitted(cfg, cal)
    c = apply_breakdown(F.breakdown(r, workload, cfg), r.params, r.kernel, cfg.name, cal, fitted=fitted)
    return replace(r, time_us=c["time_us"], time_us_sim=r.time_us, calibration=c["label"],
                   calibration_factor=c["factor"], calibrated_interval=(c["lo"], c["hi"], c["family"]))
