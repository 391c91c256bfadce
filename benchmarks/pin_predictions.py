"""Choose the pinned points of the regression test and write their predictions once:
tests/data/pinned_predictions.csv.

From data/points.csv.gz (recorded and held-out points whose stored prediction is the
estimated-resources one), per kernel family: the points at fixed quantiles of the stored signed
error, among the half that simulated quicker when recorded. Each is simulated with this checkout on configs/h200.yaml
with estimated resources (GPUSIM_RESOURCES=estimated, what the tests pin) and written with the
stored prediction beside it. The regression test then holds every later model to these numbers;
re-run this only when a change is meant to move predictions, and say so in the commit.

usage: GPUSIM_RESOURCES=estimated python benchmarks/pin_predictions.py [--out tests/data/pinned_predictions.csv]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpusim.hardware import load_gpu  # noqa: E402
from gpusim.hw.validate.predict import simulate_point  # noqa: E402

QUANTILES = (0.1, 0.4, 0.7, 0.95)     # of the stored signed error, per kernel family


def choose(df: pd.DataFrame) -> pd.DataFrame:
    """Four points per kernel family, spread over its stored signed error (good and bad alike)."""
    d = df[(df["set"] != "micro") & (df["stored_prediction_view"] == "estimated") & (df["status"] == "ok")]
    d = d.dropna(subset=["stored_error_pct"])
    picks = []
    for _, g in d.groupby("kernel"):
        g = g[g["recorded_sim_seconds"] <= g["recorded_sim_seconds"].median()]      # the quicker half
        g = g.sort_values("stored_error_pct").reset_index(drop=True)
        idx = sorted({min(len(g) - 1, int(q * len(g))) for q in QUANTILES})
        picks.append(g.iloc[idx])
    return pd.concat(picks, ignore_index=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", default=str(ROOT / "data" / "points.csv.gz"))
    ap.add_argument("--out", default=str(ROOT / "tests" / "data" / "pinned_predictions.csv"))
    args = ap.parse_args(argv)
    if os.environ.get("GPUSIM_RESOURCES") != "estimated":
        sys.exit("pin_predictions: set GPUSIM_RESOURCES=estimated (the tests pin estimated resources)")
    cfg = load_gpu(str(ROOT / "configs" / "h200.yaml"))
    picks = choose(pd.read_csv(args.table))
    pinned, secs = [], []
    for r in picks.itertuples():
        t0 = time.time()
        p = simulate_point(r.kernel, json.loads(r.params), cfg)
        secs.append(round(time.time() - t0, 2))
        pinned.append(p.get("sim_us"))
        print(f"{r.scenario}[{r.point}] {r.kernel}: stored {r.stored_predicted_us:.6g}, now {p.get('total_us')} "
              f"[{secs[-1]} s]", flush=True)
    out = picks[["scenario", "point", "kernel", "params", "measured_us", "stored_predicted_us"]].copy()
    out["pinned_us"], out["sim_seconds"] = pinned, secs
    out.to_csv(args.out, index=False, float_format="%.9g")
    print(f"wrote {args.out}: {len(out)} points, {sum(secs):.0f} s of simulation")
    return 0


if __name__ == "__main__":
    sys.exit(main())
