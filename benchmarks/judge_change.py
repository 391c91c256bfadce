"""Judge a model change on the recorded H200 points: predict every N-th point of some kernel families
with this checkout, and compare two such tables per family and set (median and p90 |error|, bias).

    GPUSIM_RESOURCES=compiled python benchmarks/judge_change.py predict --every 2 --out /tmp/after.csv
    (in a checkout of the commit before:  ... predict --every 2 --out /tmp/before.csv)
    python benchmarks/judge_change.py compare /tmp/before.csv /tmp/after.csv

The points are those of data/points.csv.gz (recorded, held-out and micro alike), in table order,
so two checkouts with the same table predict the same points, on ``--gpu`` (configs/h200.yaml by
default: the table's older rows name it by an earlier name) with the resources view of the environment.
"""
from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))       # this checkout's gpusim, in the workers too
FAMILIES = ("matmul", "attention_flash", "attention_flash_bwd", "attention_decode")


def _predict(job):
    import gpusim

    kernel, params, gpu = job
    try:
        return gpusim.simulate(kernel, gpu, check=False, **params).time_us
    except Exception:  # a point the model cannot simulate is left out of the comparison
        return None


def predict(every: int, families: list, out: str, jobs: int, gpu: str) -> None:
    pts = pd.read_csv(ROOT / "data" / "points.csv.gz")
    sel = pts[pts["kernel"].isin(families)].iloc[::every]
    work = [(r.kernel, json.loads(r.params), gpu) for r in sel.itertuples()]
    with ProcessPoolExecutor(jobs) as ex:
        preds = list(ex.map(_predict, work, chunksize=4))
    sel[["scenario", "point", "set", "kernel", "measured_us"]].assign(predicted_us=preds).to_csv(out, index=False)
    print(f"wrote {out}: {len(sel)} points")


def compare(before: str, after: str, scenarios: bool = False) -> None:
    m = pd.read_csv(before).merge(pd.read_csv(after)[["scenario", "point", "predicted_us"]],
                                  on=["scenario", "point"], suffixes=("_a", "_b")).dropna()
    for tag in ("a", "b"):
        m[f"e{tag}"] = 100.0 * (m[f"predicted_us_{tag}"] / m["measured_us"] - 1.0)
    print(f"{len(m)} points, {int(((m.predicted_us_b / m.predicted_us_a - 1).abs() > 1e-3).sum())} moved by more than 0.1%")
    print("| family | set | points | median \\|err\\| % | p90 \\|err\\| % | bias % (median) |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    groups = list(m.groupby(["kernel", "set"])) + [(("all", s), g) for s, g in m.groupby("set")]
    for (k, s), g in groups:
        a, b = g["ea"].abs(), g["eb"].abs()
        print(f"| {k} | {s} | {len(g)} | {a.median():.1f} -> {b.median():.1f} | {a.quantile(0.9):.1f} -> "
              f"{b.quantile(0.9):.1f} | {g['ea'].median():+.1f} -> {g['eb'].median():+.1f} |")
    if scenarios:       # every scenario with a point that moved: its median |error| before and after
        print("\n| scenario | points | moved | median \\|err\\| % | worst point |err| % |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for sc, g in m.groupby("scenario"):
            moved = int(((g.predicted_us_b / g.predicted_us_a - 1).abs() > 1e-3).sum())
            if moved:
                print(f"| {sc} | {len(g)} | {moved} | {g['ea'].abs().median():.1f} -> {g['eb'].abs().median():.1f} | "
                      f"{g['ea'].abs().max():.1f} -> {g['eb'].abs().max():.1f} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("predict")
    p.add_argument("--every", type=int, default=2)
    p.add_argument("--families", nargs="*", default=list(FAMILIES))
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--out", required=True)
    p.add_argument("--gpu", default=str(ROOT / "configs" / "h200.yaml"))
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    c.add_argument("--scenarios", action="store_true", help="also each scenario that has a moved point")
    a = ap.parse_args(argv)
    if a.cmd == "predict":
        predict(a.every, a.families, a.out, a.jobs, a.gpu)
    else:
        compare(a.before, a.after, a.scenarios)
    return 0


if __name__ == "__main__":
    sys.exit(main())
