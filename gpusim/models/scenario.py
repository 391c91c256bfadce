"""Model scenarios: ``model:`` and ``phase:`` instead of ``kernel:``, swept like any sweep."""
from __future__ import annotations

import itertools
from pathlib import Path

import sys

from ..bounds import PARAM_BOUNDS
from ..yamlio import apply_set, parse_assignment, read_yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from .simulate import fill_cache, simulate_model, work_of

SWEEPABLE = ("gpu", "batch", "seq_len", "context", "attention", "dtype")


class ModelScenario(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    model: str
    phase: str
    gpu: str = "h100"
    batch: int = 1
    seq_len: int | None = None
    context: int | None = None
    attention: str | None = None
    dtype: str | None = None
    sweep: dict[str, list] = {}


# the sizes a run can use (the kernel scenarios' bounds, SECURITY.md "Runs and inputs"); context as seq_len
BOUNDED = ("batch", "seq_len", "context")


def _bound_problem(name: str, v) -> str | None:
    if v is None and name != "batch":
        return None
    lo, hi = PARAM_BOUNDS["seq_len" if name == "context" else name]
    if isinstance(v, bool) or not isinstance(v, int):
        return f"must be an integer, got {str(v)[:40]!r}"
    if not lo <= v <= hi:
        return f"{name} = {str(v)[:40]} is outside the range a run can use, {lo:,} .. {hi:,}"
    return None


def is_model_scenario(path) -> bool:
    """Whether the scenario file names a model; any file it cannot read is left to the scenario
    loader, which says why in one line."""
    try:
        data = read_yaml(path)
    except Exception:   # noqa: BLE001 -- the kernel scenario loader reports it
        return False
    return isinstance(data, dict) and "model" in data


def load(path, overrides: list | None = None) -> ModelScenario:
    """Read and validate a model scenario; ``overrides`` are ``--set KEY=VALUE`` strings, as for a
    kernel scenario. Setting a field that the sweep also varies (``--set batch=2``) replaces its
    sweep list with that one value."""
    data = read_yaml(path)
    if overrides:
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a mapping with model: and phase:")
        data = apply_set(data, overrides)
        sweep = data.get("sweep")
        for a in overrides:
            parts, _ = parse_assignment(a)
            if len(parts) == 1 and isinstance(sweep, dict) and parts[0] in sweep:
                sweep = {k: v for k, v in sweep.items() if k != parts[0]}
                print(f"gpusim: --set {a}: replaces sweep.{parts[0]}", file=sys.stderr)
        if sweep is not None:
            data["sweep"] = sweep
    try:
        sc = ModelScenario.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        raise ValueError(f"{path}: field {'.'.join(map(str, err['loc']))!r}: {err['msg']}") from None
    bad = [k for k in sc.sweep if k not in SWEEPABLE]
    if bad:
        raise ValueError(f"{path}: field 'sweep.{bad[0]}': a model scenario sweeps {', '.join(SWEEPABLE)}")
    for where, name, v in [(k, k, getattr(sc, k)) for k in BOUNDED] + [
            (f"sweep.{k}[{i}]", k, x) for k in BOUNDED for i, x in enumerate(sc.sweep.get(k, []))]:
        why = _bound_problem(name, v)
        if why:
            raise ValueError(f"{path}: field {where!r}: {why}")
    if sc.model and not Path(sc.model).is_absolute() and (Path(path).parent / sc.model).exists():
        sc.model = str(Path(path).parent / sc.model)
    return sc


def points(sc: ModelScenario) -> list[dict]:
    base = sc.model_dump(include=set(SWEEPABLE))
    keys = list(sc.sweep)
    return [{**base, **dict(zip(keys, vals))} for vals in itertools.product(*(sc.sweep[k] for k in keys))]


def rows(sc: ModelScenario, res, p: dict) -> list[dict]:
    head = {"model": res.model, "phase": sc.phase, "gpu": res.gpu, "batch": res.batch,
            "seq_len": p.get("seq_len") or "", "context": p.get("context") or "", "attention": res.attention}
    out = [{**head, "op": o.op, "kernel": o.kernel, "count": o.count, "status": "ok", "reason": "",
            "time_us": round(o.time_us, 3), "share": round(o.share, 4), "bound": o.bound,
            "dram_bytes": int(o.dram_bytes), "flops": int(o.flops), "tokens_per_s": ""} for o in res.ops]
    out.append({**head, "op": "total", "kernel": "", "count": "", "status": res.status, "reason": res.reason,
                "time_us": round(res.time_us, 3) if res.time_us else "", "share": 1.0 if res.time_us else "",
                "bound": "", "dram_bytes": int(sum(o.dram_bytes for o in res.ops)),
                "flops": int(sum(o.flops for o in res.ops)),
                "tokens_per_s": round(res.tokens_per_s, 1) if res.time_us else ""})
    return out


def plot(df, path: Path) -> None:
    """Stacked bars: each point's time split by op."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ok = df[(df.op != "total")]
    if ok.empty:
        return
    key = ["gpu", "attention", "batch", "seq_len", "context"]
    ok = ok.assign(point=ok[key].astype(str).agg(" ".join, axis=1))
    pv = ok.pivot_table(index="point", columns="op", values="time_us", aggfunc="sum", sort=False) / 1e3
    ax = pv.plot.barh(stacked=True, figsize=(10, 0.35 * len(pv) + 2), width=0.8)
    ax.set_xlabel("time per step (ms)")
    ax.set_ylabel("gpu attention batch seq_len context")
    ax.legend(fontsize=7, ncol=2, loc="lower right")
    plt.tight_layout()
    plt.savefig(path, dpi=110)
    plt.close()


def run(path, out: Path, plots: bool = True, overrides: list | None = None, jobs: int = 1):
    """Simulate every point of a model scenario and print its tables. With ``jobs`` > 1 the distinct
    kernel shapes of all points are simulated first, in that many worker processes."""
    import pandas as pd
    pd.set_option("display.width", 200)
    sc = load(path, overrides)
    pts = points(sc)
    kw = [dict(phase=sc.phase, batch=p["batch"], seq_len=p["seq_len"], context=p["context"], gpu=p["gpu"],
               attention=p["attention"], dtype=p["dtype"]) for p in pts]
    if jobs > 1:
        fill_cache([w for k in kw for w in work_of(sc.model, **k)], jobs)
    out.mkdir(parents=True, exist_ok=True)
    all_rows = []
    for p, k in zip(pts, kw):
        res = simulate_model(sc.model, **k)
        print(f"\n{res.model} {sc.phase} on {res.gpu}: batch {res.batch}, "
              f"{'seq_len' if sc.phase == 'prefill' else 'context'} {res.seq}, attention {res.attention}")
        if res.status != "ok":
            print(f"  {res.status}: {res.reason}")
        else:
            print(res.table().to_string(index=False))
            print(f"  total {res.time_us / 1e3:.3f} ms, {res.tokens_per_s:,.0f} tokens/s")
        all_rows += rows(sc, res, p)
    df = pd.DataFrame(all_rows)
    df.to_csv(out / "results.csv", index=False)
    if plots:
        plot(df, out / "time_by_op.png")
    print(f"\nwrote {out / 'results.csv'}" + (f" and {out / 'time_by_op.png'}" if plots else ""))
    return df
