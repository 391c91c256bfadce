"""Re-predict every recorded H200 point with the model of this checkout and write one table.

The recorded folders (data/h200/val_*, heldout/val_*, micro/val_*) keep the prediction made when
each point was recorded, by whatever model stood then. The prediction intervals must describe the
model users run now, so ``benchmarks/fit_intervals.py --predictions FILE`` fits them on the residuals
of this table instead. One row per point and per launch: the folder (``scenario``), ``point``,
``scope`` (point or launch), ``launch`` (its index), ``predicted_us``, the predicted DRAM bytes, the
compiler view (``view``) and the commit of the model (``model``).

usage: GPUSIM_RESOURCES=estimated python benchmarks/repredict.py [--jobs N] [--out FILE] [DIR ...]
       (default out: data/h200/repredicted_<view>.csv.gz; the view is named by gpusim.compiler)
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpusim.compiler import view_name  # noqa: E402
from gpusim.hardware import load_gpu  # noqa: E402
from gpusim.hw.validate.predict import simulate_all  # noqa: E402
from gpusim.hw.validate.rows import build_rows, load_validation  # noqa: E402

DATA_DIR = ROOT / "data" / "h200"
COLUMNS = ("scenario", "point", "scope", "launch", "predicted_us", "predicted_dram_read_bytes",
           "predicted_dram_write_bytes")


def folders(data_dir: Path = DATA_DIR) -> list:
    return (sorted(data_dir.glob("val_*")) + sorted(data_dir.glob("heldout/val_*"))
            + sorted(data_dir.glob("micro/val_*")))


def commit() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "gpusim", "configs"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return sha + ("+changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="*")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--gpu", default=str(ROOT / "configs" / "h200.yaml"))
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    view = view_name()
    out = Path(args.out or DATA_DIR / f"repredicted_{'estimate' if view == 'estimate' else 'compiled'}.csv.gz")
    dirs = [Path(d) for d in args.dirs] or folders()
    model, frames, t0 = commit(), [], time.time()
    cfg = load_gpu(args.gpu)
    data = [load_validation(d) for d in dirs]
    recs = [r for v in data for r in v["points"]]      # every point of every folder in one pool
    print(f"{len(recs)} points in {len(dirs)} folders, view {view}, {args.jobs} processes", flush=True)
    preds = simulate_all([(r["kernel"], r["params"], r.get("fidelity", "fast")) for r in recs], cfg, args.jobs)
    for r, p in zip(recs, preds):
        r["predicted"] = p
    for d, v in zip(dirs, data):
        df = pd.DataFrame(build_rows(v["points"], cfg.name, v.get("param_names")))
        df = df[[c for c in COLUMNS[1:] if c in df.columns]].copy()
        df.insert(0, "scenario", d.resolve().relative_to(DATA_DIR.resolve()).as_posix()
                  if d.resolve().is_relative_to(DATA_DIR.resolve()) else d.name)
        frames.append(df)
    print(f"predicted in {time.time() - t0:.0f} s", flush=True)
    table = pd.concat(frames, ignore_index=True)
    table["view"], table["model"] = view, model
    table.to_csv(out, index=False, float_format="%.6g")
    print(f"wrote {out}: {int((table['scope'] == 'point').sum())} points, view {view}, model {model}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
