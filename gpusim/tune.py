"""Simulator-guided autotuning: rank a kernel's tile / warp / stage configs by predicted time.

``rank(kernel, gpu, shape)`` simulates every feasible config of the kernel's tunable parameters
(those named ``BLOCK*``, ``num_warps`` and ``num_stages``, with the values its spec allows) at
one shape and returns them fastest first. ``prune_configs(kernel, shape, gpu, top_k)`` gives
Triton's autotuner a pruning function so that it benchmarks only gpusim's top-k::

    @triton.autotune(configs=[...], key=["M", "N", "K"],
                     prune_configs_by={"early_config_prune": prune_configs("matmul", shape, "h100", 3)})

``gpusim tune`` is the command-line form.
"""
from __future__ import annotations

import math

TUNABLE_FIXED = ("num_warps", "num_stages")
# values tried when the user names none: a spec's choices, narrowed to the usual ones (tiles of
# at least 32, 4 or 8 warps, 2 to 4 stages)
DEFAULT_VALUES = {"num_warps": (4, 8), "num_stages": (2, 3, 4)}
MIN_BLOCK = 32


class TuneError(ValueError):
    """A tuning request names an unknown parameter or a value the kernel does not allow."""


def is_tunable(name: str) -> bool:
    return name.startswith("BLOCK") or name in TUNABLE_FIXED


def search_space(kernel, space: dict | None = None) -> dict:
    """``{param: values}`` to try: ``space`` where given, else the spec's choices (narrowed to
    DEFAULT_VALUES where that leaves some). Tunables without choices and not in ``space`` keep
    their default (e.g. a norm's BLOCK=0, the whole row)."""
    from .kernels import KernelParamError, resolve_kernel

    k = resolve_kernel(kernel)
    space = dict(space or {})
    for name in space:
        if k.param(name) is None or not is_tunable(name):
            tun = [p.name for p in k.params if is_tunable(p.name)]
            raise TuneError(f"{k.name}: {name!r} is not a tunable parameter; it has {', '.join(tun) or 'none'}")
    out = {}
    for p in k.params:
        if not is_tunable(p.name):
            continue
        if p.name in space:
            try:
                vals = [p.convert(v) for v in space[p.name]]
            except KernelParamError as e:
                raise TuneError(f"{k.name}: {e}") from None
            out[p.name] = tuple(dict.fromkeys(vals))
        elif p.choices:
            if p.name.startswith("BLOCK"):
                narrowed = tuple(v for v in p.choices if v >= MIN_BLOCK)
            else:
                narrowed = tuple(v for v in p.choices if v in DEFAULT_VALUES[p.name])
            if p.default in p.choices and p.default not in narrowed:
                narrowed += (p.default,)      # e.g. a norm's BLOCK=0 (the whole row)
            out[p.name] = narrowed or p.choices
    return out


def rank(kernel, gpu: str = "h100", shape: dict | None = None, space: dict | None = None, jobs: int = 1):
    """Every config of ``search_space`` at ``shape``, simulated: a DataFrame of the feasible ones,
    fastest first (a ``rank`` column from 1), with their parameters, ``time_us`` and its 90% interval
    (``time_us_lo``, ``time_us_hi``), ``overlaps_best`` (see ``overlaps_best``), ``tflops`` and
    ``bound``; ``.attrs["infeasible"]`` counts the configs that cannot run."""
    from . import sweep
    from .kernels import resolve_kernel

    k = resolve_kernel(kernel)
    sp = search_space(k, space)
    shape = {n: v for n, v in (shape or {}).items() if n not in sp}
    df = sweep(kernel, gpu=gpu, jobs=jobs, check=False, **shape, **{n: list(v) for n, v in sp.items()})
    ok = df[df.status == "ok"].sort_values("time_us", kind="stable").reset_index(drop=True)
    ok.insert(0, "rank", range(1, len(ok) + 1))
    ok["overlaps_best"] = overlaps_best(ok)
    ok.attrs["infeasible"] = int((df.status == "infeasible").sum())
    ok.attrs["errors"] = int((df.status == "error").sum())
    ok.attrs["space"] = sp
    return ok


def indistinguishable(ranking, tol_pct: float = 5.0) -> int:
    """How many of the top configs lie within ``tol_pct`` of the fastest prediction."""
    if ranking.empty:
        return 0
    best = ranking.time_us.iloc[0]
    return int((ranking.time_us <= best * (1 + tol_pct / 100)).sum())


def overlaps_best(ranking) -> list:
    """Per config of a ranking (fastest first): True where its 90% interval (``time_us_lo`` to
    ``time_us_hi``) overlaps the best config's, so that the two are indistinguishable within the
    intervals; None where either has no interval (an ``-ideal`` config is a bound and carries none)."""
    import math

    def iv(i):
        lo, hi = (ranking[c].iloc[i] if c in ranking else None for c in ("time_us_lo", "time_us_hi"))
        ok = all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in (lo, hi))
        return (float(lo), float(hi)) if ok else None

    if ranking.empty:
        return []
    best = iv(0)
    out = []
    for i in range(len(ranking)):
        cur = iv(i)
        out.append(None if best is None or cur is None else (cur[0] <= best[1] and best[0] <= cur[1]))
    return out


def overlap_note(ranking) -> str:
    """One line on how many configs are indistinguishable from the best within the 90% intervals
    ('' when the ranking carries no intervals)."""
    flags = list(ranking["overlaps_best"]) if "overlaps_best" in ranking else []
    if not flags or flags[0] is None:
        return ""
    n = sum(f is True for f in flags)
    if n <= 1:
        return "No other config's 90% interval overlaps the best's: the best is ahead within the 90% intervals."
    return (f"{n - 1} of the other {len(flags) - 1} configs have a 90% interval overlapping the best's "
            f"(overlaps_best): indistinguishable from the best within the 90% intervals. Each interval bounds one "
            f"prediction's error and the errors of one kernel's configs move together, so the order is more "
            f"reliable than that (docs/tune.md).")


def _config_params(cfg) -> dict:
    """A triton.Config's (or a look-alike's) parameters: its kwargs, num_warps and num_stages."""
    p = dict(getattr(cfg, "kwargs", {}) or {})
    for name in TUNABLE_FIXED:
        if getattr(cfg, name, None) is not None:
            p[name] = getattr(cfg, name)
    return p


def prune_configs(kernel, shape: dict, gpu: str = "h100", top_k: int = 3):
    """A function for ``triton.autotune(prune_configs_by={"early_config_prune": f})``: it keeps the
    ``top_k`` configs gpusim predicts fastest for ``kernel`` at ``shape`` (configs that cannot run
    are dropped; a config's kwargs the kernel does not take are ignored). Predictions are cached."""
    from .api import simulate
    from .kernels import resolve_kernel

    k = resolve_kernel(kernel)
    cache = {}

    def predicted(cfg) -> float:
        p = {n: v for n, v in _config_params(cfg).items() if k.param(n) is not None}
        key = tuple(sorted(p.items()))
        if key not in cache:
            r = simulate(k, gpu, check=False, **{**shape, **p})
            cache[key] = r.time_us if r.status == "ok" else float("inf")
        return cache[key]

    def early_config_prune(configs, named_args=None, **kwargs):
        timed = sorted(((predicted(c), i, c) for i, c in enumerate(configs)), key=lambda t: t[:2])
        keep = [c for t, _, c in timed if t != float("inf")][:top_k]
        return keep or list(configs)[:top_k]

    return early_config_prune


def count_configs(space: dict) -> int:
    return math.prod(len(v) for v in space.values())
