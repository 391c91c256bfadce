"""Fit the prediction intervals (gpusim/data/intervals.json) from the recorded H200 residuals, and
check their calibration on the points recorded after the fit.

The residual of a recorded point is r = log(measured / predicted), predicted by the model of this
checkout as stored in each folder's validation.csv (the recorded summaries are re-derived with every
model change; points recorded since carry the prediction made when they were recorded). Each point
gets the features of ``gpusim.intervals.features``; the registers (spilling) and the occupancy come
from this checkout's estimate, as a prediction with GPUSIM_RESOURCES=estimated sees them.

Method (split conformal, per group): for n residuals of a group at coverage 1 - a, lo is the
floor((n + 1) a/2)-th smallest and hi the ceil((n + 1)(1 - a/2))-th smallest (clipped to the
extremes below 19 points); a new point of the group lies inside with probability at least
(k_hi - k_lo)/(n + 1), and a group is kept only when that is MIN_GUARANTEE or more (13 points),
else its points fall back to the family, then to the pooled group. A family is split by a second
feature only where both halves make groups and the family's mean log-width shrinks by SPLIT_GAIN;
for a WIDENING feature the flagged half's interval is the hull of its own and the rest's.

usage: python benchmarks/fit_intervals.py              write gpusim/data/intervals.json (all points)
       python benchmarks/fit_intervals.py --check      fit on rounds <= 14, test on rounds 15-18
       python benchmarks/fit_intervals.py --table OUT  write the residual table as CSV
       python benchmarks/fit_intervals.py --heldout-table tests/data/interval_residuals_heldout.csv
"""
from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
import re
import sys
from datetime import datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpusim import intervals  # noqa: E402
from gpusim.hw.validate.rows import load_validation  # noqa: E402

DATA_DIR = ROOT / "data" / "h200"      # the recorded validations
OUT = ROOT / "gpusim" / "data" / "intervals.json"
COVERAGE = 0.90
MIN_GUARANTEE = 0.85     # a group's interval must cover a new point of it with at least this probability,
                         # which takes 13 points ([min, max] of 13 covers 12/14 = 85.7%)
SPLIT_GAIN = 0.10        # a second feature must narrow its family's mean log-width by 10%
SPLIT_FEATURES = ("spills", "one_stage", "low_occupancy", "dram_bound", "unaligned")
WIDENING = ("spills", "one_stage", "unaligned")
DERIVED_WIDEN = 2.0      # log-width factor for a config not measured (an assumption: see docs/model.md)
FIT_ROUND = 14           # --check: fit on rounds <= this, test on the later rounds
# Rounds 1-3 name no set after them: they are told apart by when they were recorded (docs/history.md)
EARLY_ROUNDS = (("2026-11-29", 1), ("2026-12-01T00:00", 2), ("2026-12-01T19:00", 3))


def validation_dirs(data_dir: Path = DATA_DIR) -> list:
    """(set, folder) of every recorded validation: recorded, heldout, micro."""
    return ([("recorded", d) for d in sorted(data_dir.glob("val_*"))]
            + [("heldout", d) for d in sorted(data_dir.glob("heldout/val_*"))]
            + [("micro", d) for d in sorted(data_dir.glob("micro/val_*"))])


def load_predictions(path) -> dict:
    """{(folder, point): {"predicted_us", "dram_bytes", "launch_us"}} from a table of
    ``benchmarks/repredict.py`` (the model of a stated commit, every point re-predicted)."""
    import pandas as pd

    t = pd.read_csv(path, dtype={"launch": "string"})
    t[["predicted_dram_read_bytes", "predicted_dram_write_bytes"]] = t[
        ["predicted_dram_read_bytes", "predicted_dram_write_bytes"]].fillna(0.0)
    out = {}
    for (sc, pt), g in t.groupby(["scenario", "point"], sort=False):
        p = g[g["scope"] == "point"].iloc[0]
        out[(sc, int(pt))] = {"predicted_us": float(p["predicted_us"]),
                              "dram_bytes": float(p["predicted_dram_read_bytes"] + p["predicted_dram_write_bytes"]),
                              "launch_us": [float(x) for x in g[g["scope"] == "launch"]["predicted_us"].fillna(0)]}
    return out


def load_records(data_dir: Path = DATA_DIR, predictions=None) -> list:
    """Every compared point: its set, folder, start time, kernel, params, measured and predicted us
    and predicted DRAM bytes. The one place that reads the recorded files. With ``predictions``
    (a ``load_predictions`` dict) the predictions are those where it has them, not the ones stored
    with the recording (``benchmarks/validation_table.py --check`` tells whether those still hold)."""
    out = []
    for set_, d in validation_dirs(data_dir):
        meta = load_validation(d)
        points = {p["index"]: p for p in meta["points"]}
        with gzip.open(d / "validation.csv.gz", "rt", newline="") as f:
            table = [r for r in csv.DictReader(f) if r["status"] == "ok"]
        rows = [r for r in table if r["scope"] == "point"]
        for r in rows:
            if not (r["measured_us"] and r["predicted_us"]):
                continue
            p = points[int(r["point"])]
            dram = sum(float(r[c] or 0) for c in ("predicted_dram_read_bytes", "predicted_dram_write_bytes"))
            rec = {"set": set_, "scenario": d.name, "started": meta.get("started") or "", "point": int(r["point"]),
                   "kernel": p["kernel"], "params": p["params"], "measured_us": float(r["measured_us"]),
                   "predicted_us": float(r["predicted_us"]), "dram_bytes": dram,
                   "launch_us": [float(x["predicted_us"] or 0) for x in table
                                 if x["scope"] == "launch" and x["point"] == r["point"]]}
            if predictions is not None:     # a point the table lacks keeps its stored prediction
                new = predictions.get((d.resolve().relative_to(data_dir.resolve()).as_posix(), rec["point"]))
                if new is not None and new["predicted_us"] > 0:
                    rec.update(new)
            out.append(rec)
    return out


def assign_rounds(recs: list) -> None:
    """Each record's round: the one named in its folder, else that of the named set recorded
    nearest in time (the same batch on the machine), else (before round 4) ``EARLY_ROUNDS``."""
    named = [(r["started"], int(m.group(1))) for r in recs if (m := re.search(r"round(\d+)", r["scenario"]))]
    first = min(t for t, _ in named)

    def seconds(t):
        return datetime.fromisoformat(t.replace("+0000", "+00:00")).timestamp()

    for r in recs:
        m = re.search(r"round(\d+)", r["scenario"])
        if m:
            r["round"] = int(m.group(1))
        elif r["started"] < first:
            r["round"] = max(k for t, k in EARLY_ROUNDS if t <= r["started"])
        else:
            r["round"] = min(named, key=lambda tk: abs(seconds(tk[0]) - seconds(r["started"])))[1]


def residual_table(data_dir: Path = DATA_DIR, predictions=None) -> list:
    """The residual table: one row per recorded point, r = log(measured / predicted), its features
    (``predictions``: see ``load_records``)."""
    from gpusim.backends.sim.cost import InfeasibleError, occupancy
    from gpusim.hardware import load_gpu
    from gpusim.kernels import resolve_kernel

    cfg = load_gpu(intervals.MEASURED_CONFIG)
    recs = load_records(data_dir, predictions)
    assign_rounds(recs)
    rows = []
    for r in recs:
        k = resolve_kernel(r["kernel"], base_dir=ROOT)
        w = k.build(k.resolve(r["params"]))
        launches = []
        for j, ln in enumerate(w.launches):
            try:
                o = occupancy(ln.program, cfg, ln.grid, resources="estimated")
            except InfeasibleError:
                continue
            launches.append((o.ctas_per_sm, o.spills, r["launch_us"][j] if j < len(r["launch_us"]) else 0.0))
        util = r["dram_bytes"] / (r["predicted_us"] * 1e-6 * cfg.hbm_read_bandwidth_bytes_per_s)
        f = intervals.features(r["kernel"], r["params"], launches, util)
        main = max(launches, key=lambda x: x[2]) if launches else (None,)
        rows.append({"set": r["set"], "scenario": r["scenario"], "point": r["point"], "round": r["round"],
                     "kernel": r["kernel"], **f, "ctas_per_sm": main[0], "num_warps": r["params"].get("num_warps"),
                     "dram_util": round(util, 4), "measured_us": r["measured_us"], "predicted_us": r["predicted_us"],
                     "r": math.log(r["measured_us"] / r["predicted_us"])})
    return rows


def conformal(rs, coverage: float = COVERAGE):
    """(lo, hi): the split-conformal quantiles of residuals ``rs``, or None when too few. A new
    point of the group lies in [k_lo-th, k_hi-th smallest] with probability >= (k_hi - k_lo)/(n + 1);
    short of 19 points the extremes are taken, and a group must still guarantee MIN_GUARANTEE."""
    n, a = len(rs), round(1.0 - coverage, 9)        # 1 - 0.9 is 0.0999...: floor would lose a rank
    k_lo = max(1, math.floor(round((n + 1) * a / 2, 9)))
    k_hi = min(n, math.ceil(round((n + 1) * (1 - a / 2), 9)))
    if n < 2 or (k_hi - k_lo) / (n + 1) < MIN_GUARANTEE:
        return None
    s = sorted(rs)
    return s[k_lo - 1], s[k_hi - 1]


def split_groups(rows: list, feat: str | None, coverage: float = COVERAGE):
    """(rest, flagged) intervals of a family split by ``feat`` (flagged None when not split).
    For a ``WIDENING`` feature the flagged points' interval is the hull of their own and the
    rest's: what makes the model far off (a spill, an unaligned row, one stage) does not always."""
    rest = [r["r"] for r in rows if not (feat and r[feat])]
    flagged = [r["r"] for r in rows if feat and r[feat]]
    q_rest = conformal(rest, coverage)
    if not feat:
        return q_rest, None
    q_flag = conformal(flagged, coverage)
    if q_rest is None or q_flag is None:
        return None, None
    if feat not in WIDENING:
        return q_rest, q_flag
    return q_rest, (min(q_rest[0], q_flag[0]), max(q_rest[1], q_flag[1]))


def mean_width(rows: list, feat: str | None, coverage: float = COVERAGE):
    """Mean log-width over a family's rows when split by ``feat`` (None: unsplit, or not splittable)."""
    q_rest, q_flag = split_groups(rows, feat, coverage)
    if q_rest is None:
        return None
    n_flag = sum(bool(feat and r[feat]) for r in rows)
    w = (len(rows) - n_flag) * (q_rest[1] - q_rest[0]) + (n_flag * (q_flag[1] - q_flag[0]) if n_flag else 0.0)
    return w / len(rows)


def best_split(rows: list, coverage: float = COVERAGE):
    """The feature whose split narrows a family's mean log-width by SPLIT_GAIN or more (the
    narrowest), or None."""
    base, best = mean_width(rows, None, coverage), None
    for feat in SPLIT_FEATURES:
        w = mean_width(rows, feat, coverage)
        if w is not None and w <= (1 - SPLIT_GAIN) * base and (best is None or w < best[1]):
            best = (feat, w)
    return best and best[0]


def fit(rows: list, coverage: float = COVERAGE) -> dict:
    """The interval table: per group its residual quantiles and point count, the splits chosen."""
    groups, splits = {}, {}

    def put(name, n, q):
        groups[name] = {"n": n, "lo": round(q[0], 4), "hi": round(q[1], 4)}

    put(intervals.POOLED, len(rows), conformal([r["r"] for r in rows], coverage))
    for fam in sorted({r["family"] for r in rows} - {"other"}):   # a user kernel's group is the pooled one
        fr = [r for r in rows if r["family"] == fam]
        if conformal([r["r"] for r in fr], coverage) is None:
            continue
        feat = best_split(fr, coverage)
        q_rest, q_flag = split_groups(fr, feat, coverage)
        n_flag = sum(bool(feat and r[feat]) for r in fr)
        if feat:
            splits[fam] = feat
            put(f"{fam}/{feat}", n_flag, q_flag)
        put(fam, len(fr) - n_flag, q_rest)
    return {"coverage": coverage, "derived_widen": DERIVED_WIDEN, "splits": splits, "groups": groups}


def evaluate(table: dict, rows: list) -> dict:
    """Per family (and all): points, share inside their interval, median width in % of the prediction."""
    out = {}
    for fam in sorted({r["family"] for r in rows}, key=lambda f: (f == "other", f)) + ["all"]:
        fr = [r for r in rows if fam in ("all", r["family"])]
        if not fr:          # no test point at all (a round with no microbenchmark kernels)
            continue
        inside, widths = 0, []
        for r in fr:
            _, lo, hi = intervals.lookup(r, table)
            inside += lo <= r["r"] <= hi
            widths.append((math.exp(hi) - math.exp(lo)) * 100)
        out[fam] = {"n": len(fr), "coverage": inside / len(fr), "median_width_pct": float(np.median(widths))}
    return out


def check(rows: list, fit_round: int = FIT_ROUND) -> str:
    """Fit on the points recorded up to ``fit_round``, test on the held-out points recorded after
    it; a markdown table per family (and the microbenchmarks' own kernels, which fall back to the
    pooled group as any user kernel does)."""
    table = fit([r for r in rows if r["round"] <= fit_round])
    later = [r for r in rows if r["round"] > fit_round]
    held = evaluate(table, [r for r in later if r["set"] == "heldout"])
    other = evaluate(table, [r for r in later if r["family"] == "other"]).get("other")
    lines = [f"fit: {sum(r['round'] <= fit_round for r in rows)} points of rounds <= {fit_round}; "
             f"test: the held-out points of rounds {fit_round + 1}-{max(r['round'] for r in rows)}",
             "groups: " + ", ".join(f"{g} ({v['n']})" for g, v in table["groups"].items()), "",
             "| family | test points | inside the 90% interval | median width (% of the prediction) |",
             "| --- | --- | --- | --- |"]
    for fam, v in list(held.items()) + ([("user kernels (micro)", other)] if other else []):
        inside = round(v["coverage"] * v["n"])
        lines.append(f"| {fam} | {v['n']} | {inside} ({v['coverage']:.1%}) | {v['median_width_pct']:.0f} |")
    return "\n".join(lines)


TEST_COLUMNS = ("scenario", "point", "round", "family") + SPLIT_FEATURES + ("r",)


def write_table(rows: list, path: Path, columns=None) -> None:
    """The residual table as CSV (``columns``: only those)."""
    import pandas as pd

    df = pd.DataFrame(rows)
    (df[list(columns)] if columns else df).to_csv(path, index=False, float_format="%.6g")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help=f"fit on rounds <= {FIT_ROUND}, test on the later held-out points")
    ap.add_argument("--table", help="write the residual table (CSV) here")
    ap.add_argument("--heldout-table", help="write the residuals of the --check test points (what "
                    "tests/test_intervals.py reads) here")
    ap.add_argument("--out", default=str(OUT), help="where to write the interval table")
    ap.add_argument("--predictions", help="fit on this table of benchmarks/repredict.py (every point re-predicted "
                    "by one model) instead of the predictions stored at recording")
    ap.add_argument("--fit-round", type=int, default=FIT_ROUND, help="--check: fit on rounds <= this")
    args = ap.parse_args(argv)
    preds = load_predictions(args.predictions) if args.predictions else None
    rows = residual_table(predictions=preds)
    if args.table:
        write_table(rows, Path(args.table))
    if args.heldout_table:
        write_table([r for r in rows if r["round"] > args.fit_round and r["set"] == "heldout"],
                    Path(args.heldout_table), TEST_COLUMNS)
    if args.check:
        print(check(rows, args.fit_round))
        return 0
    table = fit(rows)
    table["fitted_on"] = {"points": len(rows), "rounds": f"1-{max(r['round'] for r in rows)}",
                          "source": "data/h200 (recorded, heldout, micro)",
                          "predictions": (Path(args.predictions).name if args.predictions
                                          else "stored at recording")}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(table, indent=1) + "\n")
    print(f"wrote {args.out}: {len(table['groups'])} groups from {len(rows)} points; splits {table['splits']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
