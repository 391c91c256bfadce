"""Model scenarios: ``model:`` and ``phase:`` instead of ``kernel:``, swept like any sweep."""
from __future__ import annotations

import itertools
from pathlib import Path

import sys

from ..bounds import PARAM_BOUNDS
from ..compiler import view_name
from ..yamlio import apply_set, parse_assignment, read_yaml
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from . import deploy
from .simulate import fill_cache, simulate_model, work_of

SWEEPABLE = ("gpu", "batch", "seq_len", "context", "attention", "dtype", "tp", "weight_dtype", "kv_dtype", "overlap")
PHASES = ("prefill", "decode", "serve")


class ModelScenario(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, title="gpusim model scenario")  # strict: batch: true is not 1
    name: str = Field(description="name of the run")
    model: str = Field(description="a preset (gpusim/models/presets) or a model YAML file")
    phase: str = Field(description="prefill (seq_len tokens), decode (one token over a KV cache of context) or "
                                   "serve (time to first token: prefill of seq_len; time per output token: decode at "
                                   "context)")
    gpu: str = "h100"
    batch: int = 1
    seq_len: int | None = None
    context: int | None = None
    attention: str | None = None
    dtype: str | None = None
    tp: int = Field(1, description="GPUs the model is split over (tensor parallelism): 1, 2, 4 or 8")
    weight_dtype: str | None = Field(None, description="storage of the projection weights: fp32, bf16, fp16, fp8, "
                                                       "int8, int4 (default the model's dtype)")
    kv_dtype: str | None = Field(None, description="storage of the KV cache: fp32, bf16, fp16, fp8")
    overlap: bool = Field(False, description="hide the collectives behind the compute (perfect overlap, a bound)")
    gpu_overrides: dict[str, Any] = Field({}, description="GPU config fields to change for every point "
                                                          "(`--set gpu.<field>=VALUE` writes here)")
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


# the length each phase reads: a prefill's prompt (seq_len), a decode step's KV cache (context)
LENGTH_OF_PHASE = {"prefill": "seq_len", "decode": "context"}


def _unused_problem(sc: ModelScenario) -> str | None:
    """The field (and why) a phase would ignore: ``seq_len`` in a decode scenario, ``context`` in a
    prefill one (given or swept), else None."""
    used = LENGTH_OF_PHASE.get(sc.phase)
    for other in set(LENGTH_OF_PHASE.values()) - {used} if used else ():
        for where in [other] * (getattr(sc, other) is not None) + [f"sweep.{other}"] * (other in sc.sweep):
            return (f"{where!r}: phase {sc.phase} does not read {other}; it reads {used} "
                    f"({'the prompt length' if used == 'seq_len' else 'the KV-cache length'}): set {used} instead")
    return None


def _duplicate_problem(sweep: dict) -> str | None:
    """The first value a sweep list repeats (each point would run twice, or silently once), or None."""
    for k, vals in sweep.items():
        seen = {}
        for i, v in enumerate(vals):
            j = seen.setdefault(repr(v), i)
            if j != i:
                return f"'sweep.{k}[{i}]': {str(v)[:40]} is listed twice (also sweep.{k}[{j}]); list each value once"
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
    bad = [k for k in sc.sweep if k not in SWEEPABLE and not k.startswith("gpu.")]
    if bad:
        raise ValueError(f"{path}: field 'sweep.{bad[0]}': a model scenario sweeps {', '.join(SWEEPABLE)} "
                         f"and gpu.<field>")
    if sc.phase not in PHASES:
        raise ValueError(f"{path}: field 'phase': {str(sc.phase)[:40]!r}; allowed {', '.join(PHASES)}")
    why = deploy.problem(sc)
    if why:
        raise ValueError(f"{path}: field {why}")
    for where, name, v in [(k, k, getattr(sc, k)) for k in BOUNDED] + [
            (f"sweep.{k}[{i}]", k, x) for k in BOUNDED for i, x in enumerate(sc.sweep.get(k, []))]:
        why = _bound_problem(name, v)
        if why:
            raise ValueError(f"{path}: field {where!r}: {why}")
    why = _unused_problem(sc) or _duplicate_problem(sc.sweep)
    if why:
        raise ValueError(f"{path}: field {why}")
    if sc.model and not Path(sc.model).is_absolute() and (Path(path).parent / sc.model).exists():
        sc.model = str(Path(path).parent / sc.model)
    return sc


def points(sc: ModelScenario) -> list[dict]:
    """Every point of the sweep: its fields, and its GPU config fields changed (``gpu.<field>``)."""
    base = sc.model_dump(include=set(SWEEPABLE))
    keys = list(sc.sweep)
    return [{**base, **dict(zip(keys, vals))} for vals in itertools.product(*(sc.sweep[k] for k in keys))]


def rows(sc: ModelScenario, res, p: dict, extra: dict | None = None) -> list[dict]:
    head = {"model": res.model, "phase": sc.phase, "gpu": res.gpu, "batch": res.batch,
            "seq_len": p.get("seq_len") or "", "context": p.get("context") or "", "attention": res.attention,
            "compiler": p.get("compiler", ""), **(extra or {})}

    def rng(x):
        return round(x, 3) if x is not None else ""
    out = [{**head, "op": o.op, "kernel": o.kernel, "count": o.count, "status": "ok", "reason": "",
            "time_us": round(o.time_us, 3), "time_us_lo": rng(o.time_us_lo), "time_us_hi": rng(o.time_us_hi),
            "share": round(o.share, 4), "bound": o.bound, "dram_bytes": int(o.dram_bytes), "flops": int(o.flops),
            "tokens_per_s": "", "tokens_per_s_per_gpu": ""} for o in res.ops]
    ok = bool(res.time_us)
    out.append({**head, "op": "total", "kernel": "", "count": "", "status": res.status, "reason": res.reason,
                "time_us": round(res.time_us, 3) if ok else "", "time_us_lo": rng(res.time_us_lo) if ok else "",
                "time_us_hi": rng(res.time_us_hi) if ok else "", "share": 1.0 if ok else "",
                "bound": "", "dram_bytes": int(sum(o.dram_bytes for o in res.ops)),
                "flops": int(sum(o.flops for o in res.ops)),
                "tokens_per_s": round(res.tokens_per_s, 1) if ok else "",
                "tokens_per_s_per_gpu": round(res.tokens_per_s_per_gpu, 1) if ok else ""})
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


def _print_point(sc, res, p, cfg) -> None:
    print(f"\n{res.model} {sc.phase} on {res.gpu}: batch {res.batch}, "
          f"{'seq_len' if sc.phase == 'prefill' else 'context'} {res.seq}, attention {res.attention}, "
          f"compiler view {p['compiler']}{deploy.describe(sc, p, cfg)}")
    if res.status != "ok":
        print(f"  {res.status}: {res.reason}")
        return
    print(res.to_string())
    per_gpu = f" ({res.tokens_per_s_per_gpu:,.0f} per GPU of {res.tp})" if res.tp > 1 else ""
    print(f"  total {res.time_us / 1e3:.3f} ms (90%: {res.time_us_lo / 1e3:.3f}-{res.time_us_hi / 1e3:.3f}), "
          f"{res.tokens_per_s:,.0f} tokens/s{per_gpu}" if res.time_us_lo is not None else
          f"  total {res.time_us / 1e3:.3f} ms, {res.tokens_per_s:,.0f} tokens/s{per_gpu}")
    if res.tp > 1:
        print(f"  all-reduce per layer (two): {res.allreduce_us_per_layer():.1f} us; collectives "
              f"{res.comm_us / res.time_us:.1%} of the step" + (" (overlapped)" if res.overlap else ""))


def _serve(sc, pts, cfgs, out: Path, plots: bool):
    import pandas as pd
    from .serving import serve
    table = []
    for p, cfg in zip(pts, cfgs):
        table.append({**serve(sc.model, batch=p["batch"], context=p["context"], prompt=p["seq_len"], gpu=cfg,
                              tp=p["tp"], weight_dtype=p["weight_dtype"], kv_dtype=p["kv_dtype"], dtype=p["dtype"],
                              attention=p["attention"], overlap=p["overlap"]),
                      **{f"gpu.{f}": getattr(cfg, f) for f in deploy.changed_fields(sc)}})
    df = pd.DataFrame(table)
    show = [c for c in df.columns if not c.endswith("_status") and c != "model"]
    print(df[show].to_string(index=False, max_cols=None, line_width=None))
    for r in table:
        for k in ("ttft_status", "tpot_status"):
            if r[k] != "ok":
                print(f"  batch {r['batch']}, context {r['context']}, tp {r['tp']}: {k[:4]} {r[k]}")
    df.to_csv(out / "serving.csv", index=False)
    written = [out / "serving.csv"]
    if plots:
        from ..output.serving import plot_serving
        written += [x for x in [plot_serving(df, out / "serving.png")] if x]
    print("\nwrote " + " and ".join(map(str, written)))
    return df.assign(status=["ok" if r["tpot_status"] == "ok" else "infeasible" for r in table])


def run(path, out: Path, plots: bool = True, overrides: list | None = None, jobs: int = 1):
    """Simulate every point of a model scenario and print its tables. With ``jobs`` > 1 the distinct
    kernel shapes of all points are simulated first, in that many worker processes."""
    import pandas as pd
    pd.set_option("display.width", 200)
    sc = load(path, overrides)
    pts = points(sc)
    cfgs = [deploy.config_of(sc, p) for p in pts]
    phases = ("prefill", "decode") if sc.phase == "serve" else (sc.phase,)
    kw = [deploy.simulate_kwargs(sc, p, c, ph) for p, c in zip(pts, cfgs) for ph in phases]
    if jobs > 1:
        fill_cache([w for k in kw for w in work_of(sc.model, **k)], jobs)
    out.mkdir(parents=True, exist_ok=True)
    if sc.phase == "serve":
        return _serve(sc, pts, cfgs, out, plots)
    all_rows = []
    for p, k, cfg in zip(pts, kw, cfgs):
        res = simulate_model(sc.model, **k)
        p = {**p, "compiler": view_name(cfg)}       # the compiler's view the kernels used
        _print_point(sc, res, p, cfg)
        all_rows += rows(sc, res, p, deploy.columns(sc, p, cfg))
    df = pd.DataFrame(all_rows)
    df.to_csv(out / "results.csv", index=False)
    if plots:
        plot(df, out / "time_by_op.png")
    print(f"\nwrote {out / 'results.csv'}" + (f" and {out / 'time_by_op.png'}" if plots else ""))
    return df


def json_schema(kernel: dict) -> dict:
    """The JSON Schema of every scenario file: a kernel scenario (``kernel``: the kernel scenarios'
    schema, with its definitions under ``#/$defs``) or a model scenario (``ModelScenario``);
    ``gpusim schema`` prints it."""
    kernel = dict(kernel)
    model = ModelScenario.model_json_schema(ref_template="#/$defs/{model}")
    defs = {**kernel.pop("$defs", {}), **model.pop("$defs", {})}
    out = {"title": "gpusim scenario file", "description": "a kernel scenario (kernel:) or a model scenario "
                                                          "(model: and phase:)",
           "anyOf": [kernel, model]}
    if defs:
        out["$defs"] = defs
    return out
