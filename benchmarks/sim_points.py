"""Simulate recorded (or to-be-recorded) points with this checkout and keep the whole breakdown.

For each point of the scenario files: the mechanistic simulation on ``--gpu`` (fast fidelity, no
numpy check) and, per launch, every field of its ``KernelResult`` (cycles, busy fractions, waves,
CTAs per SM and what limits them, spills, DRAM/L2 bytes, clock, power), plus the point's
utilisation and bound. One JSON line per point in ``OUT`` (appended as each finishes, so a killed
run keeps what it simulated); the calibration layer's features are computed from these lines
(``gpusim.calibration.features``). Runs on all cores (``--jobs``).

usage: python benchmarks/sim_points.py --gpu h100 --out sim.jsonl [--jobs N] [--budget-s S]
                                       [--skip sim.jsonl] [--merge-into data/calibration/sim_h100.jsonl.gz]
                                       SCENARIO.yaml ...

``--merge-into F`` then adds the lines of ``OUT`` whose (scenario, point) ``F`` lacks to ``F``
(gzipped with no timestamp, so the same lines give the same bytes); the ones it has are kept, or,
with ``--replace``, replaced (points simulated again after a model change: ``--points-csv`` with
the points it moves).
"""
from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_GPU = None


def _init(gpu):
    global _GPU
    _GPU = gpu


def _sim(item) -> dict:
    import gpusim
    from gpusim.calibration.features import breakdown
    from gpusim.hardware import load_gpu

    rel, kind, i, kernel, params = item
    t0 = time.time()
    try:
        r = gpusim.simulate(kernel, _GPU, check=False, calibration="off", **params)
        rec = breakdown(r, gpusim.kernels.build(kernel, params), load_gpu(_GPU))
    except Exception as e:
        rec = {"status": "error", "reason": f"{type(e).__name__}: {str(e)[:300]}"}
    rec.update(scenario=rel, set=kind, point=i, kernel=kernel, params=params, gpu_config=str(_GPU),
               wall_s=round(time.time() - t0, 3))
    return rec


def merge(new: Path, into: Path, replace: bool = False) -> int:
    """Append the lines of ``new`` whose (scenario, point) ``into`` (a .jsonl.gz) lacks; the number
    added. ``replace``: a line of ``new`` also takes the place of ``into``'s line of the same point
    (a point simulated again by changed code); the number added or replaced."""
    def key(line):
        r = json.loads(line)
        return r["scenario"], int(r["point"])

    old = gzip.decompress(into.read_bytes()).decode().splitlines() if into.exists() else []
    known = {key(x) for x in old}
    add, fresh = {}, {}
    for line in new.read_text().splitlines():
        if not line.strip():
            continue
        k = key(line)
        if k in known:
            if replace:
                fresh.setdefault(k, line)       # the first line of a point wins
        else:
            add.setdefault(k, line)
    if fresh:
        old = [fresh.get(key(x), x) for x in old]
    if add or fresh:
        tmp = into.with_name(into.name + ".tmp")
        with open(tmp, "wb") as fb, gzip.GzipFile(fileobj=fb, mode="wb", mtime=0, filename="") as f:
            f.write("".join(x + "\n" for x in old + list(add.values())).encode())
        os.replace(tmp, into)
    return len(add) + len(fresh)


def main(argv=None) -> int:
    from record_points import point_list

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="*")
    ap.add_argument("--points-csv", default=None, help="simulate the rows of a points table (data/points.csv.gz) instead")
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--out", required=True)
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--budget-s", type=float, default=None)
    ap.add_argument("--skip", default=None)
    ap.add_argument("--merge-into", default=None, help="afterwards add OUT's new points to this .jsonl.gz")
    ap.add_argument("--replace", action="store_true",
                    help="with --merge-into: OUT's lines also replace the file's lines of the same points")
    a = ap.parse_args(argv)
    t0 = time.time()
    items = point_list(a.scenarios) if a.scenarios else []
    if a.points_csv:
        import pandas as pd

        df = pd.read_csv(a.points_csv)
        items += [(r.scenario, r.set, int(r.point), r.kernel, json.loads(r.params)) for r in df.itertuples()]
    if a.skip and Path(a.skip).exists():
        done = {(r["scenario"], r["point"]) for r in map(json.loads, Path(a.skip).read_text().splitlines())
                if r.get("gpu_config") == a.gpu}
        items = [x for x in items if (x[0], x[2]) not in done]
    print(f"sim_points: {len(items)} points on {a.gpu}, {a.jobs} jobs", flush=True)
    n = 0
    with mp.get_context("spawn").Pool(a.jobs, initializer=_init, initargs=(a.gpu,)) as pool, open(a.out, "a") as f:
        for rec in pool.imap(_sim, items, chunksize=1):
            f.write(json.dumps(rec, default=float) + "\n")
            f.flush()
            n += 1
            if n % 100 == 0:
                print(f"  sim {n}/{len(items)} in {time.time() - t0:.0f} s", flush=True)
            if a.budget_s and time.time() - t0 > a.budget_s:
                print(f"sim_points: budget reached after {n} points", flush=True)
                pool.terminate()
                break
    print(f"sim_points: {n} points in {time.time() - t0:.0f} s", flush=True)
    if a.merge_into:
        n = merge(Path(a.out), Path(a.merge_into), a.replace)
        print(f"sim_points: {n} points {'added or replaced' if a.replace else 'added'} in {a.merge_into}", flush=True)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    sys.exit(main())
