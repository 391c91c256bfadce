"""The learned correction over the mechanistic time, as shipped: evaluate, bound, and interval.

The fitted file (``gpusim/data/calibration.json``, written by ``benchmarks/fit_calibration.py``)
holds one ``fitted`` model: gradient-boosted regression trees over ``features.FEATURES`` (the GPU's
own balance among them) that predict ``log(measured / mechanistic)``, trained on the points of
every GPU with recorded points; and per such GPU the training range of every feature and
split-conformal quantiles per kernel family (4% and 96%, for a 90% interval: ``fit_calibration.ALPHA``) of the out-of-fold
residuals normalized by each point's difficulty: a second set of trees (``scale``) predicts the
typical |residual| of a point from its features, so an easy point gets a narrow interval and a
hard one a wide one, and the quantiles of residual / difficulty set the coverage. One ``transferred`` model over ``features.STRUCTURE`` alone, trained on every GPU's points, serves a
config without its own points (a100, a what-if of a named config, a new config); its interval
quantiles come from cross-GPU validation (trained on one GPU, tested on the other).

A point outside the training range (any feature beyond its 1-99% range by more than a tenth of
that range) has its correction halved toward the mechanistic time and its interval widened
(``EXTRAPOLATE_*``). Trees are evaluated with numpy; scikit-learn is needed only to refit.
"""
from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1] / "data" / "calibration.json"
EXTRAPOLATE_SHRINK = 0.5      # the share of the correction kept outside the training range
EXTRAPOLATE_WIDEN = 1.5       # the interval's log-width multiplied outside it
MARGIN = 0.1                  # beyond the 1-99% range by this share of it = outside
SCALE_FLOOR = 0.02            # the smallest difficulty (log units) a point's interval is scaled by


class Trees:
    """A sum of regression trees: ``baseline + sum(tree(x))``."""

    def __init__(self, d: dict):
        self.baseline = float(d["baseline"])
        self.trees = [{k: np.asarray(v) for k, v in t.items()} for t in d["trees"]]
        # every tree's nodes in one flat array (children offset to it), walked all trees at once
        sizes = [len(t["is_leaf"]) for t in d["trees"]]
        self.roots = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if sizes else np.zeros(0, np.int64)
        flat = {k: np.concatenate([t[k] for t in self.trees]) if sizes else np.zeros(0)
                for k in ("feature", "threshold", "left", "right", "value", "is_leaf")}
        off = np.repeat(self.roots, sizes)
        self.flat = (flat["feature"].astype(np.int64), flat["threshold"].astype(float), flat["left"] + off,
                     flat["right"] + off, flat["value"].astype(float), flat["is_leaf"].astype(bool))

    def predict_one(self, x) -> float:
        """The prediction for one feature vector ``x``."""
        feature, threshold, left, right, value, is_leaf = self.flat
        x = np.asarray(x, dtype=float)
        node = self.roots
        while True:
            leaf = is_leaf[node]
            if leaf.all():
                return self.baseline + float(value[node].sum())
            nxt = np.where(x[feature[node]] <= threshold[node], left[node], right[node])
            node = np.where(leaf, node, nxt)

    def predict(self, X: np.ndarray) -> np.ndarray:
        X = np.atleast_2d(np.asarray(X, dtype=float))
        out = np.full(len(X), self.baseline)
        for t in self.trees:
            node = np.zeros(len(X), dtype=int)
            for _ in range(64):
                leaf = t["is_leaf"][node].astype(bool)
                if leaf.all():
                    break
                f, thr = t["feature"][node], t["threshold"][node]
                go_left = X[np.arange(len(X)), f] <= thr
                nxt = np.where(go_left, t["left"][node], t["right"][node])
                node = np.where(leaf, node, nxt)
            out += t["value"][node]
        return out


@lru_cache(maxsize=4)
def _load(path: str, mtime: float) -> dict:
    d = json.loads(Path(path).read_text())
    for key in ("fitted", "transferred"):
        d[key]["_trees"] = Trees(d[key]["model"])
        d[key]["_scale"] = Trees(d[key]["scale"])
    return d


def load(path: Path | None = None) -> dict | None:
    p = Path(path or DATA)
    if not p.exists():
        return None
    return _load(str(p), p.stat().st_mtime)


def family(kernel: str) -> str:
    """The interval group of a kernel (user kernels pool as ``other``)."""
    return {"matmul": "matmul", "attention_flash": "flash", "attention_flash_bwd": "flash_bwd",
            "attention_decode": "decode", "gemv_splitk": "gemv", "elementwise_fused": "elementwise",
            "elementwise_chain": "elementwise", "softmax": "norms", "layernorm": "norms", "rmsnorm": "norms",
            "attention_naive": "naive"}.get(kernel, "other")


def outside(x: dict, ranges: dict) -> list:
    """The features of ``x`` beyond the training range by more than MARGIN of it."""
    out = []
    for n, (lo, hi) in ranges.items():
        span = max(hi - lo, 1e-9)
        if x[n] < lo - MARGIN * span or x[n] > hi + MARGIN * span:
            out.append(n)
    return out


def correct(model: dict, limits: dict, feats: dict, fam: str) -> tuple:
    """(log factor, (q_lo, q_hi) log interval around the calibrated time, outside features) of the
    trees ``model`` with the quantiles and training ranges ``limits`` (one GPU's, or the transferred
    model's own)."""
    names = model["features"]
    x = [float(feats[n]) for n in names]
    g = model["_trees"].predict_one(x)
    sigma = max(model["_scale"].predict_one(x), SCALE_FLOOR)
    q = limits["quantiles"].get(fam) or limits["quantiles"]["pooled"]
    lo, hi = float(q[0]) * sigma, float(q[1]) * sigma
    rng = limits["ranges"].get(fam) or limits["ranges"]["pooled"]
    out = outside(feats, {n: rng[n] for n in names if n in rng})
    if out:
        g *= EXTRAPOLATE_SHRINK
        lo, hi = lo * EXTRAPOLATE_WIDEN, hi * EXTRAPOLATE_WIDEN
    return g, (lo, hi), out


def clamp_factor(g: float, limit: float) -> float:
    return max(-limit, min(limit, g)) if math.isfinite(g) else 0.0
