"""How often the calibration's conformal intervals hold a point of a round they never saw, at
several miscoverage levels: the check behind ``fit_calibration.ALPHA``.

Cross-validation on the training points only (never the sealed ones), in two ways: folds by
scenario (what ``fit_calibration.py fit`` uses for the quantiles) and folds by recording round (a
whole round held out, as a sealed round is). The held-out points' scores are those of the folds by
round; the quantiles per kernel family come from the other folds' scores (by scenario, as
shipped). Prints, per level, the coverage and median width over all H100 points, over the
sealed-type ones (held-out rounds' ``*_roundN`` files, judged and joined) and over tile sweeps.

usage: python benchmarks/interval_level.py          # about 5 min on 2 cores
"""
from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

import fit_calibration as FC  # noqa: E402
from gpusim.calibration import features as F  # noqa: E402

LEVELS = (0.10, 0.08, 0.06)


def round_of(scenario: str, table: dict) -> int:
    m = re.search(r"_r(\d+)_|round(\d+)", scenario)
    if m:
        return int(m.group(1) or m.group(2))
    v = table.get(scenario)
    return int(v) if v == v and v is not None else -1


def oof(X, y, folds) -> tuple:
    """Out-of-fold predictions and difficulties (as ``fit_calibration.scale_oof``) over ``folds``."""
    p = FC.oof_folds(X, y, folds)
    return p, np.maximum(FC.oof_folds(X, np.abs(y - p), folds), FC.SCALE_FLOOR)


def main() -> int:
    import pandas as pd

    data = {g: rows for g, rows in FC.train_rows(["h100", "h200"]).items() if rows}
    rows = [r for g in data for r in data[g]]
    gpu = np.array([g for g in data for _ in data[g]])
    X, y, scen, fams = FC.matrix(rows, F.FEATURES)
    pts = pd.read_csv(FC.POINTS)
    table = dict(zip(pts.scenario, pts["round"]))
    rounds = np.array([round_of(s, table) for s in scen])
    groups = np.array([f"{g}:{s}" for g, s in zip(gpu, scen)])
    by_round = FC.group_folds(X, y, rounds)
    pr, sr = oof(X, y, by_round)
    ps, ss = oof(X, y, FC.group_folds(X, y, groups))
    z_round, z_scen = (y - pr) / sr, (y - ps) / ss
    sealed_type = np.array(["round" in s for s in scen])
    tiles = np.array(["_tiles_" in s for s in scen])
    print(f"{len(y)} training points ({(gpu == 'h100').sum()} H100), {len(set(rounds))} rounds")
    for alpha in LEVELS:
        cover, width, idx = [], [], []
        for tr, te in by_round:
            tr, te = tr[gpu[tr] == "h100"], te[gpu[te] == "h100"]
            for f in set(fams[te]):
                a, b = tr[fams[tr] == f], te[fams[te] == f]
                lo, hi = FC.conformal(z_scen[a], alpha)
                cover += list((z_round[b] >= lo) & (z_round[b] <= hi))
                width += list(np.exp(hi * sr[b]) - np.exp(lo * sr[b]))
                idx += list(b)
        c, w, i = np.array(cover), np.array(width), np.array(idx)
        st, tl = sealed_type[i], tiles[i]
        print(f"alpha {alpha:.2f}: all {c.mean():.1%} (width {np.median(w):.0%}), sealed-type {c[st].mean():.1%} "
              f"(width {np.median(w[st]):.0%}, {st.sum()} points), tile sweeps {c[tl].mean():.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
