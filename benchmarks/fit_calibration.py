"""Fit the calibration layer (gpusim/data/calibration.json) from the points table and the
simulated breakdowns, reproducibly; or judge it on the sealed held-out points.

Training rows: the points table's rows (data/points.csv.gz) of set ``train`` (and the older
rounds' points, whose held-out judgement is over), each joined with its simulated breakdown
(data/calibration/sim_<gpu>.jsonl.gz, from benchmarks/sim_points.py) on (scenario, point). The
sealed held-out scenarios named by ``--sealed`` are never trained on.

Per GPU: gradient-boosted trees (scikit-learn's HistGradientBoostingRegressor, fixed seed) on
``features.FEATURES`` predicting log(measured / mechanistic); hyper-parameters fixed; grouped
5-fold cross-validation by scenario gives out-of-fold residuals, whose 5% and 95% quantiles per
kernel family (split conformal, with the (n + 1) correction) are the 90% interval. The
transferred model (``features.STRUCTURE`` only) is trained on all GPUs; its quantiles come from
training on one GPU and testing on the other.

usage: python benchmarks/fit_calibration.py fit            # writes gpusim/data/calibration.json
       python benchmarks/fit_calibration.py check          # refit in memory, compare with the shipped file
       python benchmarks/fit_calibration.py judge --gpu h100 --sealed _round24.yaml  # sealed points, once
"""
from __future__ import annotations

import argparse
import datetime
import gzip
import hashlib
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpusim import kernels  # noqa: E402
from gpusim.calibration import features as F  # noqa: E402
from gpusim.calibration.model import DATA, Trees, family  # noqa: E402
from gpusim.hardware import load_gpu  # noqa: E402

POINTS = ROOT / "data" / "points.csv.gz"
SIMS = ROOT / "data" / "calibration"
# held-out scenarios still sealed (never trained on). The round-23 ones were judged once (training hash
# f0b16301327a), the round-24 ones once (training hash dd23efad1daa, docs/validation.md,
# data/h100/judged_round24.md), the round-25 ones once (training hash fc38500dd8ae,
# data/h100/judged_round25.md), the round-26 ones once (with the fit shipped before they were drawn,
# training hash 0b0dc2a852c1, data/h100/judged_round26.md), the round-27 and round-28 ones once with the
# fit shipped before they were drawn (training hash dd2637a87cbd, data/h100/judged_round27.md and
# judged_round28.md), the round-29 ones once (training hash cb1619ecd542, data/h100/judged_round29.md),
# the round-30 and round-31 ones once with the fit shipped before they were drawn (training hash
# c158f7196380, data/h100/judged_round30.md and judged_round31.md), and then joined the training set.
# The round-32 ones were judged once (training hash b1b00e80cbb9, data/h100/judged_round32.md) and the
# round-34 ones once (training hash c3d920208121, data/h100/judged_round34.md), each then joining the
# training set; the round-35 ones were judged once (training hash 5fcc351e5601,
# data/h100/judged_round35.md) and then joined the training set; so did the round-36 ones, judged once
# (training hash fc190c9e77c4, data/h100/judged_round36.md). The round-37 and round-38 ones were judged once with
# the same fit (training hash 805224574e78, data/h100/judged_round37.md and judged_round38.md) and then
# joined the training set; so did the round-39 ones, judged once (training hash a109a06ed934,
# data/h100/judged_round39.md), and the round-40 ones, judged once (training hash 5c35c5206f99,
# data/h100/judged_round40.md), and the round-41 ones, judged once (training hash d1ea8221da3d,
# data/h100/judged_round41.md); the round-42 ones were judged once (training hash d02e49582f0b,
# data/h100/judged_round42.md) and then joined the training set; so did the round-43 ones, judged once with the fit
# shipped before they were drawn (training hash d02e49582f0b, data/h100/judged_round43.md), and the round-44 ones,
# judged once (training hash b430e8003616, data/h100/judged_round44.md), and the round-45 ones, judged once (training hash
# 30455d3ace14, data/h100/judged_round45.md), and the round-46 ones, judged once (training hash 1bbdd5f35dc6,
# data/h100/judged_round46.md), and the round-47 ones, judged once (training hash d17ed664f869,
# data/h100/judged_round47.md). The round-48 ones were judged once (training hash 3350cd55807b,
# data/h100/judged_round48.md) and join the training set at the next refit; round 50 is sealed until it is judged.
SEALED: tuple = ("_round48.yaml", "_round50.yaml")
# chosen by grouped cross-validation on the training points only (absolute error: the residuals have
# heavy tails; pooling both GPUs beat one model per GPU on each; 63 leaves a tree at twice the rate
# and 600 trees beat 20 leaves and 1000 trees: median / p90 |error| h100 4.50 / 16.7 -> 4.17 / 16.0%,
# h200 4.03 / 14.5 -> 3.45 / 13.4%; more leaves or trees gained no more)
PARAMS = dict(loss="absolute_error", max_iter=600, learning_rate=0.08, max_leaf_nodes=63, min_samples_leaf=8,
              l2_regularization=1.0, random_state=0)
LIMIT = math.log(4.0)                # no correction beyond 4x either way
# the miscoverage the fitted model's conformal quantiles are computed at: 0.08, not 0.10, for the
# intervals labelled 90%. Twelve sealed rounds (26-32, 34-38), each judged once, held 86.6% of their
# points on average at 0.10 (80-94%); a new round is drawn after the fit, and cross-validation that holds
# whole rounds out (the training points only; benchmarks/interval_level.py) holds 90.8% of sealed-type
# points at 0.10 and 92.9% at 0.08 on the 13,349 points of fit 805224574e78 (median widths 23% and 25%),
# 89.9% and 91.8% on the 15,579 of fit d1ea8221da3d
ALPHA = 0.08
MIN_POINTS = 100                     # a GPU with fewer training points gets the transferred model
STRUCTURE_KEYS = {"align_bytes", "elems_per_thread", "registers", "acc_per_thread", "compiled"}


def load_rows(gpu: str) -> list:
    """[(scenario, set, kernel, params, measured_us, breakdown)] of ``gpu``'s ok points with an ok simulation."""
    import pandas as pd

    df = pd.read_csv(POINTS)
    df = df[(df["gpu"].str.replace("-measured", "") == gpu) & (df["status"] == "ok") & df["measured_us"].notna()]
    sims = {}
    path = SIMS / f"sim_{gpu}.jsonl.gz"
    if path.exists():
        with gzip.open(path, "rt") as f:
            for line in f:
                r = json.loads(line)
                if r.get("status") == "ok" and r.get("kernels"):
                    sims[(r["scenario"], int(r["point"]))] = r
    rows = []
    for r in df.itertuples():
        b = sims.get((r.scenario, int(r.point)))
        if b is not None:
            params = json.loads(r.params)
            if set(b.get("structure") or {}) != STRUCTURE_KEYS:    # recorded before the breakdown carried it all:
                b["structure"] = rebuilt_structure(r.kernel, params, b, gpu)
            rows.append((r.scenario, r.set, r.kernel, params, float(r.measured_us), b))
    return rows


def rebuilt_structure(kernel: str, params: dict, b: dict, gpu: str) -> dict:
    """The structure of a point recorded before its breakdown carried it all: a trace, the register
    estimate and, where the point was simulated with this machine's triton, the compiled counts
    (else unknown: another triton built the kernel that was timed)."""
    from gpusim.toolchain.compile import triton_version

    same = b.get("compiler") == f"triton {triton_version()}"
    return F.workload_structure(kernels.build(kernel, params), load_gpu(gpu) if same else None)


def sealed(scenario: str) -> bool:
    return bool(SEALED) and scenario.endswith(SEALED)


def matrix(rows: list, names) -> tuple:
    X = np.array([F.vector(F.features(b, p), names) for _, _, _, p, _, b in rows])
    y = np.array([math.log(m / b["time_us"]) for _, _, _, _, m, b in rows])
    groups = np.array([s for s, *_ in rows])
    fams = np.array([family(k) for _, _, k, *_ in rows])
    return X, y, groups, fams


def fit_trees(X, y) -> dict:
    from sklearn.ensemble import HistGradientBoostingRegressor

    m = HistGradientBoostingRegressor(**PARAMS).fit(X, y)
    trees = []
    for (pred,) in m._predictors:
        nd = pred.nodes
        trees.append({"feature": nd["feature_idx"].tolist(), "threshold": nd["num_threshold"].tolist(),
                      "left": nd["left"].tolist(), "right": nd["right"].tolist(),
                      "value": nd["value"].tolist(), "is_leaf": nd["is_leaf"].astype(int).tolist()})
    out = {"baseline": float(np.ravel(m._baseline_prediction)[0]), "trees": trees}
    assert np.allclose(Trees(out).predict(X), m.predict(X), atol=1e-9), "tree export does not match sklearn"
    return out


def oof_folds(X, y, folds) -> np.ndarray:
    """Out-of-fold predictions over ``folds`` ((train, test) index pairs)."""
    pred = np.zeros_like(y)
    for tr, te in folds:
        pred[te] = Trees(fit_trees(X[tr], y[tr])).predict(X[te])
    return pred


def group_folds(X, y, groups, k: int = 5) -> list:
    """GroupKFold's (train, test) pairs: no group on both sides."""
    from sklearn.model_selection import GroupKFold

    return list(GroupKFold(n_splits=min(k, len(set(groups)))).split(X, y, groups))


def oof(X, y, groups, k: int = 5) -> np.ndarray:
    """Out-of-fold predictions, folds by scenario (GroupKFold)."""
    return oof_folds(X, y, group_folds(X, y, groups, k))


SCALE_FLOOR = 0.02                   # the smallest difficulty a point is given (log units)


def scale_oof(X, res, groups, k: int = 5) -> tuple:
    """A model of each point's difficulty: trees fitted to the out-of-fold |residual| (absolute
    error loss: a median of |residual|). Returns (cross-fitted difficulty of every point, the model
    fitted on all of them); conformal scores are residual / difficulty."""
    target = np.abs(res)
    out = oof_folds(X, target, group_folds(X, res, groups, k))
    return np.maximum(out, SCALE_FLOOR), fit_trees(X, target)


def conformal(res: np.ndarray, alpha: float = 0.1) -> list:
    """Split-conformal (lo, hi) quantiles of residuals for a 1 - alpha interval."""
    n = len(res)
    qlo = min(1.0, math.ceil((n + 1) * (1 - alpha / 2)) / n)
    return [float(-np.quantile(-res, qlo)), float(np.quantile(res, qlo))]


def quantiles(res, fams, alpha: float = 0.1) -> dict:
    out = {"pooled": conformal(res, alpha)}
    for f in sorted(set(fams)):
        r = res[fams == f]
        if len(r) >= 20:
            out[f] = conformal(r, alpha)
    return out


def ranges(X, fams, names) -> dict:
    def rng(M):
        return {n: [float(np.quantile(M[:, i], 0.01)), float(np.quantile(M[:, i], 0.99))] for i, n in enumerate(names)}
    out = {"pooled": rng(X)}
    for f in sorted(set(fams)):
        if (fams == f).sum() >= 20:
            out[f] = rng(X[fams == f])
    return out


def summary(err_pct: np.ndarray) -> str:
    a = np.abs(err_pct)
    return f"n {len(a)}: median {np.median(a):.1f}%, p90 {np.quantile(a, 0.9):.1f}%, bias {np.median(err_pct):+.1f}%"


def train_rows(gpus) -> dict:
    return {g: [r for r in load_rows(g) if not sealed(r[0])] for g in gpus}


def fit_all(gpus) -> dict:
    """The fitted (pooled over GPUs) and transferred models, per-GPU quantiles and ranges, and the
    grouped cross-validation and cross-GPU figures."""
    data = {g: rows for g, rows in train_rows(gpus).items() if rows}
    fitted = {g: rows for g, rows in data.items() if len(rows) >= MIN_POINTS}
    mats = {g: matrix(rows, F.FEATURES) for g, rows in fitted.items()}
    X = np.vstack([m[0] for m in mats.values()])
    y = np.concatenate([m[1] for m in mats.values()])
    groups = np.concatenate([[f"{g}:{s}" for s in m[2]] for g, m in mats.items()])
    gpu_of = np.concatenate([[g] * len(m[1]) for g, m in mats.items()])
    pred = oof(X, y, groups)
    sigma, scale_model = scale_oof(X, y - pred, groups)
    out = {"fitted": {"features": list(F.FEATURES), "model": fit_trees(X, y), "scale": scale_model,
                      "n": int(len(y))}, "gpus": {}, "cv": {}}
    for g, (Xg, yg, gg, fg) in mats.items():
        sel = gpu_of == g
        res = (yg - pred[sel]) / sigma[sel]
        out["gpus"][g] = {"quantiles": quantiles(res, fg, ALPHA), "ranges": ranges(Xg, fg, F.FEATURES), "n": int(len(yg)),
                          "scenarios": int(len(set(gg))), "config_hash": load_gpu(g).config_hash()}
        out["cv"][g] = {"mechanistic": summary(100 * (np.exp(-yg) - 1)),
                        "calibrated": summary(100 * (np.exp(pred[sel] - yg) - 1))}
    # transferred: structure only, all GPUs; its quantiles from training on the other GPU(s)
    sx, sy, _, sf = matrix([r for rows in data.values() for r in rows], F.STRUCTURE)
    res, cross = [], {}
    for g in data:
        others = [r for h, rows in data.items() if h != g for r in rows]
        if not others:
            continue
        Xo, yo, _, _ = matrix(others, F.STRUCTURE)
        Xg, yg, _, fg = matrix(data[g], F.STRUCTURE)
        mo = fit_trees(Xo, yo)
        po = oof(Xo, yo, np.arange(len(yo)) % 5)
        so = Trees(fit_trees(Xo, np.abs(yo - po))).predict(Xg)
        pg = Trees(mo).predict(Xg)
        res.append(((yg - pg) / np.maximum(so, SCALE_FLOOR), fg))
        cross[g + " (transferred model)"] = summary(100 * (np.exp(pg - yg) - 1))
        Xof, yof, _, _ = matrix(others, F.FEATURES)
        Xgf, ygf, _, _ = matrix(data[g], F.FEATURES)
        cross[g + " (full features)"] = summary(100 * (np.exp(Trees(fit_trees(Xof, yof)).predict(Xgf) - ygf) - 1))
    r_all = np.concatenate([r for r, _ in res]) if res else sy * 0
    f_all = np.concatenate([f for _, f in res]) if res else sf
    sp = oof(sx, sy, np.arange(len(sy)) % 5)
    out["transferred"] = {"features": list(F.STRUCTURE), "model": fit_trees(sx, sy), "n": int(len(sy)),
                          "scale": fit_trees(sx, np.abs(sy - sp)),
                          "quantiles": quantiles(r_all, f_all), "ranges": ranges(sx, sf, F.STRUCTURE)}
    out["cross_gpu"] = cross
    out["training_hash"] = training_hash(data)
    out["limit_log"] = LIMIT
    return out


def check(gpus) -> int:
    """Refit the shipped file's two models (not its cross-validation) and compare them and the
    training hash with the shipped ones; 0 when they match."""
    data = {g: rows for g, rows in train_rows(gpus).items() if rows}
    mats = [matrix(rows, F.FEATURES) for rows in data.values() if len(rows) >= MIN_POINTS]
    fitted = fit_trees(np.vstack([m[0] for m in mats]), np.concatenate([m[1] for m in mats]))
    sx, sy, _, _ = matrix([r for rows in data.values() for r in rows], F.STRUCTURE)
    old = json.loads(DATA.read_text())
    same = old["training_hash"] == training_hash(data) and old["fitted"]["model"] == json.loads(json.dumps(fitted)) \
        and old["transferred"]["model"] == json.loads(json.dumps(fit_trees(sx, sy)))
    print("the shipped calibration " + ("matches a refit" if same else "differs from a refit"))
    return 0 if same else 1


def training_hash(data: dict) -> str:
    """sha256 of the training rows (GPU, scenario, kernel, params, measured and mechanistic time)."""
    h = hashlib.sha256()
    for g in sorted(data):
        for s, st, k, p, m, b in sorted(data[g], key=lambda r: (r[0], json.dumps(r[3], sort_keys=True))):
            h.update(json.dumps([g, s, k, p, round(m, 4), round(b["time_us"], 4)], sort_keys=True).encode())
    return h.hexdigest()


def code_version() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except Exception:
        return "unknown"


def judge(gpu: str, rows: list, cal: dict) -> None:
    """Mechanistic vs calibrated on the given rows, per family and overall, with interval coverage
    and median width (markdown)."""
    from gpusim.calibration import apply_breakdown

    by = {}
    for s, st, k, p, m, b in rows:
        c = apply_breakdown(b, p, k, gpu, cal)
        by.setdefault(family(k), []).append((m, b["time_us"], c["time_us"], c["lo"], c["hi"]))
    allv = [x for v in by.values() for x in v]
    print(f"| family | points | mechanistic median / p90 / bias % | calibrated median / p90 / bias % | "
          f"90% interval coverage | median width |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for fam, v in sorted(by.items()) + [("**all**", allv)]:
        m = np.array([x[0] for x in v])
        s = 100 * (np.array([x[1] for x in v]) / m - 1)
        c = 100 * (np.array([x[2] for x in v]) / m - 1)
        lo, hi = np.array([x[3] for x in v]), np.array([x[4] for x in v])
        cover = np.mean((lo <= m) & (m <= hi))
        width = np.median((hi - lo) / np.array([x[2] for x in v]))
        f = lambda e: f"{np.median(np.abs(e)):.1f} / {np.quantile(np.abs(e), .9):.1f} / {np.median(e):+.1f}"  # noqa: E731
        print(f"| {fam} | {len(v)} | {f(s)} | {f(c)} | {cover:.0%} | {width:.0%} |")
    tile_sweeps(gpu, rows, cal)


def tile_sweeps(gpu: str, rows: list, cal: dict) -> None:
    """Per tile-sweep scenario (one shape, many tile configs): Spearman of predicted vs measured
    times and the measured time of the predicted best over the measured best."""
    from scipy.stats import spearmanr

    from gpusim.calibration import apply_breakdown

    print("\n| tile sweep (one shape) | configs | Spearman mechanistic / calibrated | predicted best's loss mechanistic / calibrated |")
    print("| --- | ---: | ---: | ---: |")
    for scen in sorted({r[0] for r in rows if "_tiles_" in r[0]}):
        v = [(m, b["time_us"], apply_breakdown(b, p, k, gpu, cal)["time_us"]) for s, _, k, p, m, b in rows if s == scen]
        if len(v) < 4:
            continue
        m, s_, c = (np.array(x) for x in zip(*v))
        gap = lambda pred: 100 * (m[np.argmin(pred)] / m.min() - 1)  # noqa: E731
        print(f"| {Path(scen).stem} | {len(v)} | {spearmanr(s_, m)[0]:.2f} / {spearmanr(c, m)[0]:.2f} | "
              f"{gap(s_):.1f}% / {gap(c):.1f}% |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cmd", choices=("fit", "check", "judge"))
    ap.add_argument("--gpus", default="h100,h200")
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--sealed", default=None, help="judge: the suffix of the sealed scenarios (default: SEALED)")
    a = ap.parse_args(argv)
    gpus = a.gpus.split(",")
    if a.cmd == "judge":
        from gpusim.calibration.model import load

        suffix = tuple(a.sealed.split(",")) if a.sealed else SEALED
        rows = [r for r in load_rows(a.gpu) if suffix and r[0].endswith(suffix)]
        seen = {(k, json.dumps(p, sort_keys=True)) for rs in train_rows(gpus).values() for _, _, k, p, _, _ in rs}
        kept = [r for r in rows if (r[2], json.dumps(r[3], sort_keys=True)) not in seen]
        print(f"judge: {len(kept)} sealed points ({len(rows) - len(kept)} left out: a training point has "
              f"the same kernel and params)\n")
        rows = kept
        judge(a.gpu, rows, load())
        return 0
    if a.cmd == "check":
        return check(gpus)
    out = fit_all(gpus)
    for g, cv in out["cv"].items():
        print(f"{g}: grouped 5-fold CV by scenario: mechanistic {cv['mechanistic']}; calibrated {cv['calibrated']}")
    for g, s_ in out["cross_gpu"].items():
        print(f"cross-GPU, trained on the other GPU(s), tested on {g}: {s_}")
    out.update(code=code_version(), date=datetime.date.today().isoformat(), fitter="HistGradientBoostingRegressor",
               params=PARAMS)
    DATA.write_text(json.dumps(out, indent=None, separators=(",", ":")) + "\n")
    print(f"wrote {DATA.relative_to(ROOT)} ({DATA.stat().st_size / 1e3:.0f} kB), training hash {out['training_hash'][:12]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
