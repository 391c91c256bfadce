"""The headline accuracy table of docs/validation.md, from the stored predictions in
data/points.csv.gz (no simulation): per set (recorded, held-out) and kernel family, the
points, median and p90 |time error|, the signed bias (mean signed error), and over the tile sweeps
(points of one scenario that differ only in tiles, warps or stages, at least 3 of them) the median
Spearman rank correlation and the mean and worst loss of the predicted-best config against the
measured best.

usage: python benchmarks/headline_table.py [--table data/points.csv.gz] [--view estimated]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
FAMILY = {"matmul": "GEMM", "attention_flash": "flash attention", "attention_flash_bwd": "flash backward",
          "attention_decode": "flash decoding", "attention_naive": "naive attention",
          "elementwise_chain": "elementwise", "elementwise_fused": "elementwise",
          "softmax": "softmax / norms", "layernorm": "softmax / norms", "rmsnorm": "softmax / norms"}


def sweeps(d: pd.DataFrame) -> pd.DataFrame:
    """One row per tile sweep: its Spearman and the predicted pick's loss (%)."""
    out = []
    for (_, _, fam), g in d.groupby(["scenario", "group", "family"]):
        if len(g) < 3:
            continue
        rho = g["measured_us"].rank().corr(g["stored_predicted_us"].rank())
        pick = g.loc[g["stored_predicted_us"].idxmin(), "measured_us"]
        out.append({"family": fam, "spearman": rho, "loss": 100.0 * (pick / g["measured_us"].min() - 1)})
    return pd.DataFrame(out, columns=["family", "spearman", "loss"])


def summary(d: pd.DataFrame) -> list:
    rows = []
    sw = sweeps(d)
    for fam, g in list(d.groupby("family")) + [("all", d)]:
        e = g["stored_error_pct"]
        s = sw if fam == "all" else sw[sw["family"] == fam]
        rows.append([fam, len(g), np.median(e.abs()), np.percentile(e.abs(), 90), e.mean(), len(s),
                     s["spearman"].median() if len(s) else np.nan, s["loss"].mean() if len(s) else np.nan,
                     s["loss"].max() if len(s) else np.nan])
    return rows


def markdown(df: pd.DataFrame, view: str) -> str:
    d = df[(df["set"] != "micro") & (df["status"] == "ok") & (df["stored_prediction_view"] == view)]
    d = d.dropna(subset=["stored_error_pct"]).assign(family=lambda x: x["kernel"].map(FAMILY))
    lines = ["| set | family | points | median \\|err\\| % | p90 \\|err\\| % | bias % | sweeps | Spearman "
             "(median) | pick loss % (mean / worst) |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for tag in ("recorded", "heldout"):
        if not (d["set"] == tag).any():
            continue
        for fam, n, med, p90, bias, ns, rho, loss, worst in summary(d[d["set"] == tag]):
            b = "**" if fam == "all" else ""
            sp = "" if np.isnan(rho) else f"{rho:.2f}"
            lo = "" if np.isnan(loss) else f"{loss:.1f} / {worst:.0f}"
            lines.append(f"| {tag} | {b}{fam}{b} | {n} | {b}{med:.1f}{b} | {b}{p90:.1f}{b} | {bias:+.1f} | {ns} | "
                         f"{sp} | {lo} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", default=str(ROOT / "data" / "points.csv.gz"))
    ap.add_argument("--view", default="estimated", choices=("estimated", "compiled"))
    args = ap.parse_args(argv)
    print(markdown(pd.read_csv(args.table), args.view))
    return 0


if __name__ == "__main__":
    sys.exit(main())
