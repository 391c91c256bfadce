"""How well gpusim's ranking picks tile configs: every recorded and held-out H200 tile sweep.

For each validation.csv.gz under data/h200/val_* and data/h200/heldout/val_*,
the measured points (scope "point", status ok) are grouped by the file's ``group`` column (the
point's kernel and shape: everything except the tile, warp and stage parameters). A group with
at least two configs is a tuning problem. For each group:

- top-1 hit: the config gpusim predicts fastest is within 5% of the measured best;
- top-3 hit: one of the three predicted fastest is within 5% of the measured best (what an
  autotuner that benchmarks only gpusim's top 3 would find);
- saved: 1 - (measured time of the top-3 configs) / (measured time of all configs), the share
  of benchmarking time that top-3 pruning saves (one run of each config).

Run:  python benchmarks/tune_hit_rate.py [--tol 5]
"""
import argparse
import glob
import os

import pandas as pd

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "h200")


def groups(path):
    d = pd.read_csv(path, low_memory=False)
    d = d[(d.scope == "point") & (d.status == "ok")].dropna(subset=["measured_us", "predicted_us"])
    for _, g in d.groupby(["gpu", "group"]):
        if len(g) >= 2:
            yield g


def score(g, tol):
    best = g.measured_us.min()
    ranked = g.sort_values("predicted_us", kind="stable")
    good = ranked.measured_us <= best * (1 + tol / 100)
    return dict(n=len(g), top1=bool(good.iloc[0]), top3=bool(good.iloc[:3].any()),
                saved=1 - ranked.measured_us.iloc[:3].sum() / g.measured_us.sum(),
                loss1=ranked.measured_us.iloc[0] / best - 1)


def table(tol):
    rows = []
    for kind, pattern in (("recorded", "val_*"), ("held-out", os.path.join("heldout", "val_*"))):
        for path in sorted(glob.glob(os.path.join(ROOT, pattern, "validation.csv.gz"))):
            for g in groups(path):
                rows.append(dict(set=kind, sweep=os.path.basename(os.path.dirname(path)), **score(g, tol)))
    return pd.DataFrame(rows)


def summary(df):
    def agg(d):
        big = d[d.n > 3]
        return pd.Series({"sweeps": d.sweep.nunique(), "groups": len(d), "configs": int(d.n.sum()),
                          "top-1 hit": f"{d.top1.mean():.0%}", "top-3 hit": f"{d.top3.mean():.0%}",
                          "top-3 hit (>3 configs)": f"{big.top3.mean():.0%} of {len(big)}" if len(big) else "-",
                          "top-1 median loss": f"{d.loss1.median():.1%}", "top-3 saves": f"{big.saved.mean():.0%}"})
    out = df.groupby("set").apply(agg, include_groups=False)
    out.loc["all"] = agg(df)
    return out


def markdown(df):
    """A pandas frame as a markdown table (index first)."""
    head = [df.index.name or ""] + [str(c) for c in df.columns]
    rows = [[str(i)] + [str(v) for v in r] for i, r in zip(df.index, df.itertuples(index=False))]
    return "\n".join("| " + " | ".join(r) + " |" for r in [head, ["---"] * len(head)] + rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tol", type=float, default=5.0, help="a config within this percent of the measured best is a hit")
    ap.add_argument("--per-sweep", action="store_true", help="also print each sweep's figures")
    a = ap.parse_args()
    df = table(a.tol)
    print(f"tolerance {a.tol:g}% of the measured best; 'top-3 saves' averages groups with more than 3 configs\n")
    print(markdown(summary(df)))
    if a.per_sweep:
        per = df.groupby(["set", "sweep"]).agg(groups=("n", "size"), configs=("n", "sum"), top1=("top1", "mean"),
                                               top3=("top3", "mean"), saved=("saved", "mean"))
        print()
        print(markdown(per.round(2)))


if __name__ == "__main__":
    main()
