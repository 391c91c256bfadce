"""Re-predict every recorded H200 validation with the code in this checkout and print one table.

Per recorded scenario: points compared, median and p90 |time error|, mean signed error, and for each
tile sweep the Spearman rank correlation, how far the predicted-best config is from the measured
best, and whether the pick spills registers. Then the whole set, and the held-out set apart.

usage: python benchmarks/validation_table.py [--gpu configs/h200.yaml] [--jobs 2] [--json OUT]
       [DIR ...]        (default: data/h200/val_* and data/h200/heldout/val_*)
Set GPUSIM_RESOURCES=compiled (triton installed) or estimated to choose where registers and the
instruction mix come from. Each scenario's last column counts the points whose prediction moved by
more than 0.5% from the one stored in data/points.csv.gz with the same resources view;
--check exits 1 when any did (the full regression check: with GPUSIM_RESOURCES=estimated every
stored prediction of the round-17 model should hold).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpusim.hw.validate import analyze, resimulate  # noqa: E402
from gpusim.hw.validate.predict import compiler_mismatch  # noqa: E402
from gpusim.hw.validate.rows import load_validation  # noqa: E402


def _moved(rows, stored: dict, name: str) -> int:
    """Points whose prediction differs from the stored one by more than 0.5%."""
    n = 0
    for r in rows:
        old = stored.get((name, int(r["point"]))) if r.get("scope") == "point" else None
        if old and old == old and r.get("predicted_us") is not None and abs(r["predicted_us"] / old - 1) > 0.005:
            n += 1
    return n


def _point_errors(rows) -> list:
    return [abs(r["error_pct"]) for r in rows if r.get("scope") == "point" and r.get("error_pct") is not None]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="*")
    ap.add_argument("--gpu", default=str(ROOT / "configs" / "h200.yaml"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", help="write the per-scenario summary here")
    ap.add_argument("--check", action="store_true", help="exit 1 when a stored prediction moved by more than 0.5%%")
    args = ap.parse_args(argv)
    rec = ROOT / "data" / "h200"
    table = pd.read_csv(rec.parent / "points.csv.gz")
    table = table[table["stored_prediction_view"] == os.environ.get("GPUSIM_RESOURCES")]     # like with like
    stored = dict(zip(zip(table["scenario"], table["point"]), table["stored_predicted_us"]))
    moved_total = 0
    dirs = [Path(d) for d in args.dirs] or sorted(rec.glob("val_*")) + sorted(rec.glob("heldout/val_*"))
    out, pooled = {}, {"recorded": [], "heldout": []}
    print(f"{'scenario':32s} {'n':>4s} {'median%':>8s} {'p90%':>6s} {'signed%':>8s}  sweeps (spearman / pick loss %)")
    notes = set()
    for d in dirs:
        t0 = time.time()
        note = compiler_mismatch(load_validation(d))
        if note and note not in notes:
            notes.add(note)
            print(note, flush=True)
        rows = resimulate(d, args.gpu, jobs=args.jobs)
        s = analyze(rows)
        pt = s["time_error"]["point"]
        groups = [(g.get("spearman"), g.get("sim_pick_loss_pct")) for g in s.get("tile_groups", [])
                  if g.get("spearman") is not None]
        tag = "heldout" if d.parent.name == "heldout" else "recorded"
        moved = _moved(rows, stored, d.resolve().relative_to(rec.resolve()).as_posix() if d.resolve().is_relative_to(
            rec.resolve()) else d.name)
        moved_total += moved
        pooled[tag] += _point_errors(rows)
        out[d.name] = {"set": tag, "n": pt["n"], "median_abs_pct": pt["median_abs_pct"], "p90_abs_pct": pt["p90_abs_pct"],
                       "mean_signed_pct": pt["mean_signed_pct"], "sweeps": groups, "abs_errors_pct": _point_errors(rows)}
        sweeps = ", ".join(f"{sp:.2f}/{loss:.0f}" for sp, loss in groups)
        print(f"{(tag == 'heldout') * '*'}{d.name:31s} {pt['n']:4d} {pt['median_abs_pct']:8.1f} {pt['p90_abs_pct']:6.1f} "
              f"{pt['mean_signed_pct']:+8.1f}  {sweeps} [{time.time() - t0:.0f} s] moved {moved}", flush=True)
    for tag, errs in pooled.items():
        if errs:
            print(f"{tag:32s} {len(errs):4d} {np.median(errs):8.1f} {np.percentile(errs, 90):6.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    print(f"predictions moved by more than 0.5% from the stored ones: {moved_total}")
    return 1 if args.check and moved_total else 0


if __name__ == "__main__":
    sys.exit(main())
