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


def rank(kernel, gpu: str = "h100", shape: dict | None = None, space: dict | None = None, jobs: int | None = 1,
         out=None, margin: float = 0.05, prune: bool = True, progress: bool | None = False):
    """The configs of ``search_space`` at ``shape``: a DataFrame of the simulated feasible ones,
    fastest first (a ``rank`` column from 1), with their parameters, ``time_us`` and its 90% interval
    (``time_us_lo``, ``time_us_hi``), ``overlaps_best`` (see ``overlaps_best``), ``tflops``, ``bound``
    and ``lower_bound_us`` (``lower_bound.py``).

    Configs whose lower bound exceeds the best simulated time by more than ``margin`` are pruned
    unsimulated (``prune=False`` simulates all): the best config and every one within ``margin`` of
    it are always in the ranking (``tune_search.py``). ``jobs``: processes (None: every core).
    ``out``: a directory where each simulated config is saved as it finishes and served on a re-run.
    ``.attrs``: ``infeasible``, ``pruned``, ``errors``, ``simulated``, ``cached`` (counts),
    ``others`` (a DataFrame of the configs not ranked: status pruned, infeasible or error, their
    ``reason`` and ``lower_bound_us``) and ``space``."""
    import pandas as pd

    from .kernels import resolve_kernel
    from .sweep.runner import cap_jobs, collect, result_columns
    from .sweep.scenario import load_scenario
    from .tune_search import bounds_of, search
    from .tune_store import TuneStore

    k = resolve_kernel(kernel)
    sp = search_space(k, space)
    shape = {n: v for n, v in (shape or {}).items() if n not in sp}
    data = {"kernel": kernel if isinstance(kernel, str) else k.name, "gpu": gpu, "check": False, "fidelity": "fast",
            "params": shape, "sweep": {n: list(v) for n, v in sp.items()}}
    sc = load_scenario("gpusim tune", data=data)
    bounds, infeasible, errors, late = bounds_of(sc.points, _builder(k))
    jobs, _ = cap_jobs(jobs)
    res = search(sc.points, bounds, TuneStore(out), jobs=jobs, margin=margin, prune=prune, progress=progress,
                 late=late)
    rows = {**res.rows, **errors}
    records = {i: {"row": r, "kernels": []} for i, r in rows.items()}
    table, _ = collect(sc, records, list(range(len(sc.points))))
    df = pd.DataFrame(table, columns=result_columns(sc))
    df["lower_bound_us"] = [bounds.get(i, float("nan")) for i in sorted(rows)]
    ok = df[df.status == "ok"].sort_values("time_us", kind="stable").reset_index(drop=True)
    ok.insert(0, "rank", range(1, len(ok) + 1))
    ok["overlaps_best"] = overlaps_best(ok)
    others = _others(sc, sp, df, infeasible, res.pruned, {**bounds, **res.stopped}, res.stopped)
    ok.attrs.update(infeasible=int((others.status == "infeasible").sum()), pruned=len(res.pruned), stopped=len(res.stopped),
                    errors=int((others.status != "infeasible").sum() - len(res.pruned)),
                    simulated=len(res.rows) - res.cached, cached=res.cached, others=others, space=sp)
    return ok


def _builder(k):
    """(workload, GPU config) of a point of kernel ``k``; ValueError when it cannot be built."""
    def build(pt):
        return k.build(k.resolve(pt.params)), pt.config
    return build


def _others(sc, sp: dict, df, infeasible: dict, pruned: list, bounds: dict, stopped: dict):
    """The configs not ranked, one row each: their tunable parameters, status, reason, lower bound
    (for a config ``stopped`` mid-simulation, the time its simulation passed)."""
    import pandas as pd

    rows = []
    for i in pruned:
        why = ("its simulation passed the best time by more than the margin and was stopped there" if i in stopped
               else "its lower bound exceeds the best time by more than the margin")
        rows.append({**{n: sc.points[i].params[n] for n in sp}, "status": "pruned", "lower_bound_us": bounds[i],
                     "reason": why})
    for i, why in infeasible.items():
        rows.append({**{n: sc.points[i].params[n] for n in sp}, "status": "infeasible", "reason": why})
    for r in df[df.status != "ok"].itertuples(index=False):
        r = r._asdict()
        rows.append({**{n: r[n] for n in sp}, "status": r["status"], "reason": r["reason"],
                     "lower_bound_us": r.get("lower_bound_us")})
    return pd.DataFrame(rows, columns=[*sp, "status", "reason", "lower_bound_us"])


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


CSV_COLUMNS = ("time_us", "time_us_lo", "time_us_hi", "time_us_sim", "overlaps_best", "tflops", "bound", "lower_bound_us",
               "status", "reason")


def write_csv(ranking, out) -> str:
    """``OUT/tune.csv``: the ranking, then the configs not ranked (pruned, infeasible, errors) with
    their status, reason and lower bound; returns its path."""
    import os

    import pandas as pd

    sp = list(ranking.attrs.get("space", {}))
    cols = ["rank", *sp, *CSV_COLUMNS]
    others = ranking.attrs.get("others")
    parts = [ranking.reindex(columns=cols)]
    if others is not None and len(others):
        parts.append(others.reindex(columns=cols))
    path = os.path.join(out, "tune.csv")
    pd.concat(parts, ignore_index=True).to_csv(path, index=False)
    return path


def report_lines(ranking, margin: float = 0.05) -> list:
    """The lines ``gpusim tune`` prints under its table: what was simulated, pruned and infeasible,
    how many configs the best is indistinguishable from, and why configs could not run."""
    a = ranking.attrs
    saved = f" ({a['cached']} saved from an earlier run)" if a.get("cached") else ""
    npr, stopped = a.get("pruned", 0), a.get("stopped", 0)
    how = (f"{npr - stopped} never simulated, their lower bound more than {margin:.0%} above the best time, and "
           f"{stopped} stopped once their simulation passed it" if stopped else
           f"never simulated: their lower bound is more than {margin:.0%} above the best time")
    lines = [f"{len(ranking)} configs ranked{saved}; {npr} pruned, {how} (docs/tune.md); "
             f"{a.get('infeasible', 0)} infeasible; {a.get('errors', 0)} errors."]
    n = indistinguishable(ranking, margin * 100)
    if len(ranking):
        lines.append(f"The top {n} are within {margin:.0%} of each other: indistinguishable at the model's accuracy; "
                     f"benchmark them." if n > 1 else f"The best is more than {margin:.0%} ahead of the next.")
    if overlap_note(ranking):
        lines.append(overlap_note(ranking))
    return lines + reason_lines(a.get("others"), list(a.get("space", {})))


def reason_lines(others, names: list, examples: int = 4) -> list:
    """One line per kind of reason the infeasible and failed configs give (numbers aside), with its
    count and one config's full reason."""
    import re

    if others is None or not len(others):
        return []
    bad = others[others.status.isin(["infeasible", "error", "unphysical"])]
    groups: dict = {}
    for r in bad.itertuples(index=False):
        r = r._asdict()
        why = str(r["reason"])
        kind = re.sub(r"\d[\d,.]*", "#", why.split(" (")[0].split(";")[0])
        groups.setdefault((r["status"], kind), []).append((r, why))
    out = []
    for (status, _), items in sorted(groups.items(), key=lambda g: -len(g[1]))[:examples]:
        r, why = items[0]
        cfg = " ".join(f"{n}={r[n]}" for n in names)
        out.append(f"  {len(items)} {status}, e.g. {cfg}: {why[:200]}")
    if len(groups) > examples:
        out.append(f"  ... and {len(groups) - examples} other kinds of reason")
    return [f"Configs that cannot run ({len(bad)}; each with its reason in tune.csv with --out):"] + out if out else []
