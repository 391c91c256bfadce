"""The simulator's side of a validation: predict points as plain data, in worker processes.

Owns ``simulate_point`` (one point; each launch also predicted alone on a cold L2 when the workload
has several, as each is timed alone on the GPU) and ``resimulate`` (every point of a saved
``validation.json`` re-predicted on another config, measured numbers kept as recorded).
"""
from __future__ import annotations

import os
import time

from ...hardware import GPUConfig, load_gpu
from .common import error_text
from .rows import build_rows, load_validation


def simulate_point(kernel: str, params: dict, cfg, fidelity: str = "fast", calibration: str = "on") -> dict:
    """Prediction of one point as plain data (runs in worker processes; never raises): ``total_us``
    the prediction (calibrated unless ``calibration`` is off), ``sim_us`` the mechanistic time."""
    from ...api import simulate

    t0 = time.time()
    try:
        cfg = cfg if isinstance(cfg, GPUConfig) else GPUConfig.model_validate(cfg)
        r = simulate(kernel, cfg, check=False, fidelity=fidelity, calibration=calibration, **params)
    except Exception as e:  # recorded as sim-error; the measurement still counts
        return {"status": "error", "reason": error_text(e), "sim_seconds": round(time.time() - t0, 2)}
    if r.status != "ok":
        return {"status": r.status, "reason": r.reason, "sim_seconds": round(time.time() - t0, 2)}
    # per-launch numbers are measured one launch at a time (do_bench clears the L2 first and the
    # timed region adds its fixed cost; ncu flushes caches before each kernel): predict them the
    # same way, each launch alone on a cold L2, when the workload has several launches
    alone = list(r.kernels)
    if len(r.kernels) > 1:
        import dataclasses

        from ...api import simulate_workload
        from ...kernels import build

        w = build(kernel, params)
        alone = [simulate_workload(dataclasses.replace(w, launches=(lc,)), cfg, check=False, fidelity=fidelity,
                                   calibration=calibration)
                 for lc in w.launches]
        alone = [(a.kernels[0], a.time_us) for a in alone]
    else:
        alone = [(r.kernels[0], r.time_us)]
    return {"status": "ok", "reason": "", "total_us": r.time_us, "sim_us": r.time_us_sim, "calibration": r.calibration,
            "dram_read_bytes": r.dram_read_bytes,
            "dram_write_bytes": r.dram_write_bytes, "l2_read_bytes": r.l2_read_bytes,
            "l2_merged_bytes": r.l2_merged_bytes,
            "launches": [{"launch": k.launch, "time_us": t, "dram_read_bytes": k.dram_read_bytes,
                          "dram_write_bytes": k.dram_write_bytes, "l2_read_bytes": k.l2_read_bytes,
                          "l2_merged_bytes": k.l2_merged_bytes,
                          "l2_hit_rate": k.l2_hit_rate, "ctas_per_sm": k.ctas_per_sm,
                          "occupancy_limiter": k.occupancy_limiter, "waves": k.waves} for k, t in alone],
            "sim_seconds": round(time.time() - t0, 2)}


def simulate_all(points: list, cfg: GPUConfig, jobs: int | None = None) -> list:
    """[prediction] for [(kernel, params, fidelity)], in worker processes when jobs > 1."""
    jobs = jobs if jobs is not None else max(1, min(len(points), (os.cpu_count() or 2) - 1))
    if jobs <= 1 or len(points) <= 1:
        return [simulate_point(k, p, cfg, f) for k, p, f in points]
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    data = cfg.model_dump()
    with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn")) as ex:
        return list(ex.map(simulate_point, [k for k, _, _ in points], [p for _, p, _ in points],
                           [data] * len(points), [f for _, _, f in points]))


def compiler_mismatch(data: dict) -> str | None:
    """A one-line note when this machine would compile the re-predicted kernels with another Triton
    than the one that built the measured kernels (registers, spills and the loop's instructions
    can differ between versions: the backward's dQ at d 128, 64x64, 8 warps is 137 registers and
    one CTA per SM with triton 3.9, 128 and two with 3.6); None when they agree or nothing compiles."""
    from ...compiler import resources_mode
    from ...toolchain import compile as tc

    measured = (data.get("environment") or {}).get("triton")
    if not measured or resources_mode() == "estimated" or not tc.available():
        return None
    import triton

    if triton.__version__ == measured:
        return None
    return (f"note: the measured kernels were built by triton {measured}; this machine compiles with triton "
            f"{triton.__version__}, so compiled registers and instruction mix may differ from what ran "
            f"(pip install triton=={measured} to re-predict like with like)")


def resimulate(validation_json_path, gpu_config, jobs: int | None = 1) -> list:
    """Rows of a saved validation with every point re-predicted on ``gpu_config`` (a GPUConfig,
    a config name or a YAML path). Measured numbers are kept as recorded."""
    data = load_validation(validation_json_path)
    cfg = gpu_config if isinstance(gpu_config, GPUConfig) else load_gpu(gpu_config)
    recs = data["points"]
    preds = simulate_all([(r["kernel"], r["params"], r.get("fidelity", "fast")) for r in recs], cfg, jobs)
    for r, p in zip(recs, preds):
        r["predicted"] = p
    return build_rows(recs, cfg.name, data.get("param_names"))
