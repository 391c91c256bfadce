"""Ablation: each mechanism of the timing model switched off in turn, and what that does to the
error on the recorded H200 points and on the held-out ones.

A mechanism is switched off by setting the config fields it reads to their ideal value (the
value the ``-ideal`` configs carry: an empty table, None, 0 or 1), or, for the compiler's view,
by timing with the analytic estimate instead of Triton's compiler. Every point is re-predicted
with the code in this checkout against its recorded measurement. The table gives, per set, the
median and p90 |error| with everything on, then each mechanism's change when it is off (positive
= the error grows without it: the mechanism pays for itself).

Every mechanism is judged on the mechanistic time (``calibration="off"``). One more row, "learned
calibration", turns the calibration layer on over everything (``calibration="on"``): its change is
the calibrated error against the mechanistic one. Every point read here is in the calibration's
training set, so that row is an in-sample figure; docs/validation.md gives the sealed held-out one.

usage: python benchmarks/ablation.py [--gpu configs/h200.yaml] [--jobs N] [--per-dir K]
       [--only NAME ...] [--json OUT] [DIR ...]
  --per-dir K   re-predict every K-th point of each recorded directory (1 = all), to bound the time
Run with GPUSIM_RESOURCES=compiled and the recordings' triton (3.6) installed to judge like with like.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpusim.hardware import GPUConfig, load_gpu  # noqa: E402
from gpusim.hw.validate.predict import simulate_point  # noqa: E402
from gpusim.hw.validate.rows import build_rows, load_validation  # noqa: E402

RECORDED = ROOT / "data" / "h200"

# mechanism -> the config fields that switch it off (their ideal values); "resources" is the
# compiler's view, switched off by timing with the analytic estimate
MECHANISMS = {
    "compiler view (registers, spills, SASS)": {"resources": "estimated"},
    "clock under load (power)": {"power_limit_w": None, "activity_energy_j": {}},
    "tile efficiency table": {"tensor_tile_efficiency": []},
    "SIMT rates per op class": {"simt_lane_ops_per_clk_per_sm": {}},
    "tensor/SIMT overlap": {"tensor_simt_overlap": 1.0},
    "CTA dispatch rate": {"cta_dispatch_ns": 0.0},
    "unvectorised access rate": {"scalar_access_per_clk_per_sm": {}},
    "misaligned staged tiles": {"staged_access_cost": {}},
    "HBM piece efficiency": {"hbm_piece_efficiency": {}},
    "cp.async minimum width": {"cp_async_min_bytes": 0},
    "L2 fetch block (sector pairs)": {"l2_fetch_bytes": 0},
    "request latency by lines": {"request_latency_cycles": {}},
    "L2 request coalescer": {"l2_coalesced_fraction": {}},
    "loaded HBM latency": {"hbm_queue_window_cycles": None},
    "per-warp load rate": {"warp_load_bytes_per_clk": None},
    "dependent latency (scoreboard)": {"dependent_latency_cycles": {}},
    "HBM copy rate (bus turnaround)": {"hbm_copy_bandwidth_bytes_per_s": None},
    "spill stores at the L2 write rate": {"l2_write_bandwidth_bytes_per_s": None},
    "spill reload latency": {"dependent_latency_cycles": lambda base: {**base.dependent_latency_cycles, "local": 0.0}},
    "launch and sync overheads": {"launch_overhead_us": 0.0, "sync_overhead_us": 0.0},
}
CALIBRATION_ROW = "learned calibration (gpusim.calibration; in-sample here)"
SWITCHES = ("resources", "calibration")     # not config fields


def config_without(base: GPUConfig, fields: dict) -> GPUConfig:
    """``base`` with ``fields`` at their ideal values (validated like any config; a callable value
    is given ``base`` and returns the field's value)."""
    upd = {k: v(base) if callable(v) else v for k, v in fields.items() if k not in SWITCHES}
    return GPUConfig.model_validate({**base.model_dump(), **upd})


def _predict(kernel, params, fidelity, cfg_data, resources, calibration="off"):
    """One point in a worker, with the compiler's view ``resources``."""
    if resources:
        os.environ["GPUSIM_RESOURCES"] = resources
    return simulate_point(kernel, params, cfg_data, fidelity, calibration=calibration)


def sample(dirs: list, per_dir: int) -> list:
    """[(set, dir name, data, [point records])]: every ``per_dir``-th point of each directory."""
    out = []
    for d in dirs:
        data = load_validation(d)
        recs = [r for r in data["points"] if r.get("status") == "ok" and r.get("measured")]
        out.append(("heldout" if d.parent.name == "heldout" else "recorded", d.name, data, recs[::per_dir]))
    return out


def errors(samples: list, preds: list, cfg_name: str) -> dict:
    """set -> [|error| %] of ``preds`` (in the order of the samples' points)."""
    out, it = {"recorded": [], "heldout": []}, iter(preds)
    for tag, _, data, recs in samples:
        recs = [dict(r, predicted=next(it)) for r in recs]
        rows = build_rows(recs, cfg_name, data.get("param_names"))
        out[tag] += [abs(r["error_pct"]) for r in rows if r.get("scope") == "point" and r.get("error_pct") is not None]
    return out


def run(samples: list, base: GPUConfig, mechanisms: dict, jobs: int) -> dict:
    """name ('all on' first) -> set -> [|error| %]."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    pts = [(r["kernel"], r["params"], r.get("fidelity", "fast")) for _, _, _, recs in samples for r in recs]
    variants = {"all on": {}, **mechanisms, CALIBRATION_ROW: {"calibration": "on"}}
    futs = {}
    with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn")) as ex:
        for name, fields in variants.items():
            data = config_without(base, fields).model_dump()
            res = fields.get("resources", "")
            cal = fields.get("calibration", "off")
            futs[name] = [ex.submit(_predict, k, p, f, data, res, cal) for k, p, f in pts]
        return {name: errors(samples, [f.result() for f in fs], base.name) for name, fs in futs.items()}


def table(res: dict) -> str:
    def stat(e):
        return (np.median(e), np.percentile(e, 90)) if e else (float("nan"), float("nan"))

    base = {s: stat(res["all on"][s]) for s in ("recorded", "heldout")}
    n = {s: len(res["all on"][s]) for s in base}
    lines = [f"| mechanism switched off | recorded median | recorded p90 | held-out median | held-out p90 |",
             "| --- | ---: | ---: | ---: | ---: |",
             f"| none (all on): {n['recorded']} recorded, {n['heldout']} held-out points | "
             f"{base['recorded'][0]:.1f} | {base['recorded'][1]:.1f} | {base['heldout'][0]:.1f} | {base['heldout'][1]:.1f} |"]
    for name, e in res.items():
        if name == "all on":
            continue
        d = {s: tuple(a - b for a, b in zip(stat(e[s]), base[s])) for s in base}
        lines.append(f"| {name} | {d['recorded'][0]:+.1f} | {d['recorded'][1]:+.1f} | "
                     f"{d['heldout'][0]:+.1f} | {d['heldout'][1]:+.1f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="*")
    ap.add_argument("--gpu", default=str(ROOT / "configs" / "h200.yaml"))
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--per-dir", type=int, default=1)
    ap.add_argument("--only", nargs="*", help="mechanisms to switch off (default: every one)")
    ap.add_argument("--json", help="write every variant's errors here")
    a = ap.parse_args(argv)
    dirs = [Path(d) for d in a.dirs] or sorted(RECORDED.glob("val_*")) + sorted(RECORDED.glob("heldout/val_*"))
    mech = {k: v for k, v in MECHANISMS.items() if not a.only or any(o.lower() in k.lower() for o in a.only)}
    base = load_gpu(a.gpu)
    t0 = time.time()
    samples = sample(dirs, a.per_dir)
    res = run(samples, base, mech, a.jobs)
    print(table(res))
    print(f"\n{sum(len(s[3]) for s in samples)} points x {len(mech) + 1} variants in {time.time() - t0:.0f} s "
          f"(resources: {os.environ.get('GPUSIM_RESOURCES', 'auto')}, every {a.per_dir}. point per directory)")
    if a.json:
        Path(a.json).write_text(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
