"""How far the two compiler views apart: every point of some scenarios timed with the analytic
estimate (``GPUSIM_RESOURCES=estimated``) and with Triton's compiler (``compiled``; triton must be
installed, no GPU needed), and the difference per scenario (median and worst |compiled/estimate - 1|).

usage: python benchmarks/compiler_views.py [--jobs 2] [--csv OUT.csv] [SCENARIO.yaml ...]
       (default: every kernel scenario in scenarios/, the user-kernel examples, and two user kernels
       with math in their loops or rows: benchmarks/kernels/softcap_attention.yaml, swiglu_views.yaml)
"""
from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ["scenarios/flash_vs_naive.yaml", "scenarios/seq_len_sweep.yaml", "scenarios/elementwise_fusion.yaml",
           "scenarios/gpus_compared.yaml", "scenarios/essay.yaml", "scenarios/sram_io_complexity.yaml",
           "scenarios/tile_sweep.yaml", "scenarios/whatif_sram_l2.yaml", "scenarios/examples/alibi.yaml",
           "scenarios/examples/rmsnorm.yaml", "scenarios/examples/softcap.yaml",
           "benchmarks/kernels/softcap_attention.yaml", "benchmarks/kernels/swiglu_views.yaml"]


def times(scenario: str, mode: str, jobs: int, tmp: Path) -> dict:
    """Point label -> (time_us, compiler) for ``scenario`` run with resources ``mode``."""
    out = tmp / f"{Path(scenario).stem}_{mode}"
    env = dict(os.environ, GPUSIM_RESOURCES=mode)
    subprocess.run([sys.executable, "-m", "gpusim", "run", scenario, "--out", str(out), "--jobs", str(jobs),
                    "--no-plots", "--force"], env=env, check=True, capture_output=True, cwd=ROOT)
    rows = list(csv.DictReader(open(out / "results.csv")))
    cols = list(rows[0])
    key = cols[:cols.index("status")]     # the point's parameters come before its results
    return {tuple(r[c] for c in key): (float(r["time_us"]), r["compiler"]) for r in rows if r["status"] == "ok"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="*", default=DEFAULT)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--csv", help="write every point's two times here")
    a = ap.parse_args(argv)
    pooled, out_rows = [], []
    print(f"{'scenario':40s} {'n':>3s} {'median%':>8s} {'worst%':>7s}  compiled view")
    with tempfile.TemporaryDirectory() as td:
        for sc in a.scenarios:
            est, comp = times(sc, "estimated", a.jobs, Path(td)), times(sc, "compiled", a.jobs, Path(td))
            d = [(k, comp[k][0] / est[k][0] - 1) for k in est if k in comp]
            ab = [abs(x) * 100 for _, x in d]
            if not ab:
                print(f"{sc:40s}   0  (no point ran ok in both views)")
                continue
            pooled += ab
            out_rows += [{"scenario": sc, "point": " ".join(k), "estimate_us": est[k][0], "compiled_us": comp[k][0],
                          "diff_pct": round(x * 100, 2)} for k, x in d]
            views = sorted({v for _, v in comp.values()})
            print(f"{sc:40s} {len(d):3d} {np.median(ab):8.1f} {max(ab):7.1f}  {', '.join(views)}")
    print(f"{'all':40s} {len(pooled):3d} {np.median(pooled):8.1f} {max(pooled):7.1f}")
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(out_rows[0]))
            w.writeheader()
            w.writerows(out_rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
