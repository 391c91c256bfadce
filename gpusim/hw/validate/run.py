"""``gpusim validate``: run a scenario's points on the real GPU and in the simulator, and compare.

Owns the orchestration: ``run_validation`` measures every point (``measure``), predicts it in worker
processes meanwhile (``predict``), optionally reads DRAM bytes from ncu (``ncu``), and saves
``validation.json`` after every point; ``main(args)`` is the command (a scenario, ``--reanalyze``
of a saved run, or the ncu child ``--ncu-points``) and writes the report (``report``).

Status of a point: ok, wrong-result (outputs off; not timed), gpu-error (build, compile or run
failed on the GPU), sim-infeasible / sim-error (measured, not predicted), infeasible (both the
simulator and the GPU refuse it: agreement), skipped (the GPUSIM_DEADLINE time budget ran out).
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from ...hardware import GPUConfig, load_gpu
from .analysis import analyze
from .common import atomic_write, error_text, gpu_problem, log, median_spread, pct
from .measure import SAMPLE_ROWS, SEEDS, TOL, TritonCudaBackend, measure_point
from .ncu import NCU_MAX_DEFAULT, ncu_points_entry, run_ncu, select_ncu_points
from .predict import compiler_mismatch, resimulate, simulate_point
from .report import fmt, print_table, write_report
from .rows import build_rows, group_key, load_validation, rows_from_json

DEFAULT_GPU = "h200"      # the measured H200: the config a validation run predicts with unless --gpu says otherwise


def _environment_meta(backend) -> dict:
    try:
        return backend.environment()
    except Exception as e:
        return {"error": error_text(e)}


def _recorded_kernel(pt) -> str:
    """The kernel a record names: a built-in's name, or a kernel file's path relative to the working
    directory (the scenario names it relative to itself; the repository root is where validations
    run and are re-analysed), so measuring, predicting and ``--reanalyze`` all find the file."""
    ref = pt.kernel_ref or pt.kernel
    where, sep, attr = ref.rpartition(":")
    if sep and os.path.isabs(where):
        return f"{os.path.relpath(where)}:{attr}"
    return ref


def _start_predictions(records: list, cfg: GPUConfig, jobs: int | None) -> tuple:
    """(pool, {index: future}) predicting every point in worker processes; (None, {}) to predict
    inline after measuring (one job, or no process pool on this machine)."""
    jobs = jobs if jobs is not None else max(1, min(len(records), (os.cpu_count() or 2) - 2))
    if jobs <= 1:
        return None, {}
    try:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn"))
        data = cfg.model_dump()
        futures = {r["index"]: pool.submit(simulate_point, r["kernel"], r["params"], data, r["fidelity"])
                   for r in records}
        log(f"simulating {len(records)} points on {cfg.name} in {jobs} worker processes")
        return pool, futures
    except Exception as e:
        log(f"process pool unavailable ({error_text(e)}); simulating inline after measuring")
        return None, {}


def _measure_all(records: list, backend, seeds, reference: bool, deadline, param_names: list, save) -> None:
    """Measure every point in order (skipped once the deadline passes), saving after each."""
    for rec in records:
        if deadline is not None and time.time() > deadline:
            rec.update(status="skipped", reason="time budget (GPUSIM_DEADLINE) reached")
            continue
        t0 = time.time()
        rec.update(measure_point(rec["kernel"], rec["params"], backend, seeds, reference))
        m = rec.get("measured") or {}
        med, sp = median_spread(m.get("total_us"))
        desc = " ".join(f"{k}={v}" for k, v in rec["params"].items() if k in param_names)
        log(f"[{rec['index'] + 1}/{len(records)}] {rec['kernel']} {desc}: {rec['status']}"
            + (f" err={rec['max_rel_err']:.2g}" if rec.get("max_rel_err") is not None else "")
            + (f" measured {med:.1f} us (spread {sp:.1f}%)" if med is not None else "")
            + (f" ({rec['reason']})" if rec["reason"] else "") + f" [{time.time() - t0:.1f}s]")
        save()


def _collect_predictions(records: list, futures: dict, cfg: GPUConfig, deadline) -> None:
    """Fill record["predicted"] from the workers (or inline), logging each against its measurement."""
    log("collecting predictions")
    for rec in records:
        f = futures.get(rec["index"])
        try:
            if f is None:
                rec["predicted"] = simulate_point(rec["kernel"], rec["params"], cfg, rec["fidelity"])
            else:
                wait = None if deadline is None else max(10.0, deadline - time.time())
                rec["predicted"] = f.result(timeout=wait)
        except Exception as e:  # includes the timeout: resimulate() can fill it in later
            rec["predicted"] = {"status": "error", "reason": f"worker: {error_text(e) or type(e).__name__}"}
        p = rec["predicted"]
        med, _ = median_spread((rec.get("measured") or {}).get("total_us"))
        if p.get("status") == "ok" and med:
            log(f"  p{rec['index']}: predicted {p['total_us']:.1f} us vs measured {med:.1f} us "
                f"({pct(p['total_us'], med):+.1f}%) [sim {p.get('sim_seconds')}s]")
        elif p.get("status") != "ok":
            log(f"  p{rec['index']}: simulator {p.get('status')}: {p.get('reason')}")


def _profile(records: list, meta: dict, out: Path, ncu_max: int, deadline) -> None:
    """DRAM counters of up to ``ncu_max`` measured points (the rest recorded as skipped)."""
    sel, skipped = select_ncu_points(records, ncu_max)
    meta["ncu_selected"], meta["ncu_skipped"] = sel, skipped
    for i in skipped:
        records[i]["ncu"] = {"error": f"skipped: more than --ncu-max {ncu_max} points"}
    if sel:
        meta["ncu"] = run_ncu(records, sel, out, deadline)


def run_validation(sc, cfg: GPUConfig, out: Path, backend=None, *, ncu: bool = True, ncu_max: int = NCU_MAX_DEFAULT,
                   reference: bool = False, deadline: float | None = None, jobs: int | None = None,
                   seeds=SEEDS, config_source: str = "") -> tuple:
    """Measure and predict every point of scenario ``sc``; returns (records, meta). Saves
    ``out/validation.json`` after every point."""
    from ... import __version__

    backend = backend or TritonCudaBackend()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        from ...provenance import git_revision

        rev = git_revision()
    except Exception:
        rev = None
    meta = {"scenario_name": sc.name, "scenario_source": str(sc.source), "scenario": sc.data, "gpu": cfg.name,
            "gpu_config_hash": cfg.config_hash(), "gpu_config_source": config_source, "gpu_config": cfg.model_dump(),
            "gpusim_version": __version__, "git_revision": rev, "param_names": list(sc.param_names),
            "seeds": list(seeds), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "ncu_max": ncu_max,
            "tolerances": TOL, "sample_rows": SAMPLE_ROWS}
    records = [{"index": i, "kernel": _recorded_kernel(pt), "params": dict(pt.params), "fidelity": pt.fidelity,
                "group": group_key(pt.kernel, pt.params), "status": "skipped", "reason": "not run",
                "predicted": None, "ncu": None} for i, pt in enumerate(sc.points)]

    def save():
        meta["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        atomic_write(out / "validation.json", json.dumps({**meta, "points": records}, indent=1, default=str))

    pool, futures = _start_predictions(records, cfg, jobs)
    meta["environment"] = _environment_meta(backend)
    log(f"{sc.name}: {len(records)} points, measured on {meta['environment'].get('device', backend.name)}, "
        f"predicted with {cfg.name} ({cfg.config_hash()})")
    save()
    try:
        _measure_all(records, backend, seeds, reference, deadline, meta["param_names"], save)
        _collect_predictions(records, futures, cfg, deadline)
        save()
    finally:
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
    if ncu:
        _profile(records, meta, out, ncu_max, deadline)
        save()
    else:
        meta["ncu"] = {"disabled": "--no-ncu"}
    save()
    return records, meta


def ncu_max_of(args) -> int:
    """Points profiled with ncu: ``--ncu-max``, else GPUSIM_NCU_MAX, else NCU_MAX_DEFAULT."""
    v = getattr(args, "ncu_max", None)
    if v is None and os.environ.get("GPUSIM_NCU_MAX"):
        v = int(os.environ["GPUSIM_NCU_MAX"])
    return NCU_MAX_DEFAULT if v is None else int(v)


def validate(args) -> int:
    """``gpusim validate SCENARIO``: measure, predict, report (args: scenario, gpu, out, set, no_ncu,
    ncu_max, reference, jobs)."""
    from ...sweep.scenario import load_scenario

    sc = load_scenario(args.scenario, args.set)
    gpu = args.gpu or DEFAULT_GPU
    cfg = load_gpu(gpu)
    problem = gpu_problem()
    if problem:
        print(f"gpusim validate {args.scenario}: {problem}; measuring needs a CUDA GPU "
              f"(--reanalyze DIR re-predicts a saved run on a CPU)", file=sys.stderr)
        return 2
    out = Path(args.out)
    deadline = float(os.environ["GPUSIM_DEADLINE"]) if os.environ.get("GPUSIM_DEADLINE") else None
    t0 = time.time()
    records, meta = run_validation(sc, cfg, out, ncu=not args.no_ncu, ncu_max=ncu_max_of(args),
                                   reference=bool(args.reference), deadline=deadline,
                                   jobs=getattr(args, "jobs", None), config_source=str(gpu))
    rows = build_rows(records, cfg.name, list(sc.param_names))
    summary = analyze(rows)
    written = write_report(out, rows, summary, meta)
    print_table(rows)
    te = summary["time_error"]
    log(f"done in {time.time() - t0:.0f}s: {summary['counts']['by_status']}; per point median |err| "
        f"{fmt(te['point']['median_abs_pct'])}%, p90 {fmt(te['point']['p90_abs_pct'])}%")
    log("wrote " + ", ".join(str(p) for p in [out / "validation.json"] + written))
    return 0 if summary["counts"]["compared_points"] else 1


def reanalyze(source, gpu: str | None = None, out=None, jobs: int | None = None) -> int:
    """``gpusim validate --reanalyze DIR``: the report of a saved validation, every point re-predicted
    on ``gpu`` when given (measured numbers kept as recorded), written to ``out`` (default DIR)."""
    data = load_validation(source)
    meta = {k: v for k, v in data.items() if k != "points"}
    if gpu:
        cfg = load_gpu(gpu)
        note = compiler_mismatch(data)
        if note:
            print(note, file=sys.stderr)
        rows = resimulate(source, cfg, jobs)
        meta.update(gpu=cfg.name, gpu_config_hash=cfg.config_hash(), gpu_config_source=gpu)
    else:
        rows = rows_from_json(source)
    summary = analyze(rows)
    out = Path(out or (source if Path(source).is_dir() else Path(source).parent))
    written = write_report(out, rows, summary, meta)
    print_table(rows)
    print("wrote " + ", ".join(map(str, written)))
    return 0


def main(args) -> int:
    """Entry point of ``gpusim validate``: the ncu child (``--ncu-points``), a re-analysis
    (``--reanalyze``) or a validation run of a scenario."""
    if getattr(args, "ncu_points", None):
        return ncu_points_entry(args.ncu_points)
    if getattr(args, "reanalyze", None):
        return reanalyze(args.reanalyze, args.gpu, args.out, getattr(args, "jobs", None))
    return validate(args)
