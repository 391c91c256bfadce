"""Error statistics of validation rows: ``analyze(rows) -> summary``.

Owns average-rank Spearman correlation, absolute/signed error statistics, and the summary: counts
by status, time error per point / launch / kernel, tile-sweep groups (rank correlation, whether the
simulator's pick is the measured best), DRAM byte error against ncu, PyTorch references, problems.
Works on rows as built or as read back from ``validation.csv``.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from .common import pct
from .rows import num, tile_label


def rankdata(x) -> np.ndarray:
    """1-based ranks, ties get their average rank."""
    x = np.asarray(x, dtype=float)
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    sx = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and sx[j + 1] == sx[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def spearman(a, b):
    """Spearman rank correlation (Pearson correlation of the average ranks); None if undefined."""
    if len(a) != len(b) or len(a) < 2:
        return None
    ra, rb = rankdata(a), rankdata(b)
    if np.std(ra) == 0 or np.std(rb) == 0:
        return None
    return float(np.corrcoef(ra, rb)[0, 1])


def error_stats(values) -> dict:
    v = [float(x) for x in values if x is not None]
    if not v:
        return {"n": 0, "median_abs_pct": None, "p90_abs_pct": None, "mean_signed_pct": None, "max_abs_pct": None}
    a = np.abs(v)
    return {"n": len(v), "median_abs_pct": float(np.median(a)), "p90_abs_pct": float(np.percentile(a, 90)),
            "mean_signed_pct": float(np.mean(v)), "max_abs_pct": float(np.max(a))}


def _time_error(ok_p: list, ok_l: list) -> dict:
    t = {"point": error_stats(num(r, "error_pct") for r in ok_p),
         "launch": error_stats(num(r, "error_pct") for r in ok_l), "point_by_kernel": {}, "launch_by_kernel": {}}
    for k in sorted({r["kernel"] for r in ok_p}):
        t["point_by_kernel"][k] = error_stats(num(r, "error_pct") for r in ok_p if r["kernel"] == k)
    for k in sorted({(r["kernel"], r["launch"]) for r in ok_l}):
        t["launch_by_kernel"][f"{k[0]}/{k[1]}"] = error_stats(
            num(r, "error_pct") for r in ok_l if (r["kernel"], r["launch"]) == k)
    return t


def _tile_groups(ok_p: list) -> tuple:
    """(groups, their summary): the compared points of each tile-sweep group with two or more."""
    groups = []
    by_group: dict = {}
    for r in ok_p:
        by_group.setdefault(r.get("group") or r["kernel"], []).append(r)
    for g, rs in by_group.items():
        if len(rs) < 2:
            continue
        meas = [num(r, "measured_us") for r in rs]
        pred = [num(r, "predicted_us") for r in rs]
        bm, bp = int(np.argmin(meas)), int(np.argmin(pred))
        groups.append({"group": g, "kernel": rs[0]["kernel"], "n": len(rs), "spearman": spearman(pred, meas),
                       "measured_best_point": int(num(rs[bm], "point")), "measured_best_tile": tile_label(rs[bm]),
                       "measured_best_us": meas[bm], "sim_best_point": int(num(rs[bp], "point")),
                       "sim_best_tile": tile_label(rs[bp]), "sim_best_measured_us": meas[bp],
                       "sim_pick_is_best": bm == bp, "sim_pick_within_5pct": meas[bp] <= 1.05 * meas[bm],
                       "sim_pick_loss_pct": (meas[bp] / meas[bm] - 1.0) * 100.0})
    rhos = [g["spearman"] for g in groups if g["spearman"] is not None and g["n"] >= 3]
    return groups, {"groups": len(groups), "groups_with_3plus": len(rhos),
                    "mean_spearman": float(np.mean(rhos)) if rhos else None,
                    "median_spearman": float(np.median(rhos)) if rhos else None,
                    "sim_pick_is_best": sum(g["sim_pick_is_best"] for g in groups),
                    "sim_pick_within_5pct": sum(g["sim_pick_within_5pct"] for g in groups)}


def _dram_stats(rs: list) -> dict:
    rs = [r for r in rs if num(r, "dram_error_pct") is not None]
    out = error_stats(num(r, "dram_error_pct") for r in rs)
    out["read"] = error_stats(pct(num(r, "predicted_dram_read_bytes"), num(r, "measured_dram_read_bytes"))
                              for r in rs)
    out["write"] = error_stats(pct(num(r, "predicted_dram_write_bytes"), num(r, "measured_dram_write_bytes"))
                               for r in rs)
    return out


def _dram(pts: list, lns: list) -> dict:
    dram_ok = [r for r in pts if r.get("status") in ("ok", "sim-missing")]
    dram_ok_l = [r for r in lns if r.get("status") in ("ok", "sim-missing")]
    return {"point": _dram_stats(dram_ok), "launch": _dram_stats(dram_ok_l),
            "launch_by_kernel": {f"{k[0]}/{k[1]}": _dram_stats([r for r in dram_ok_l
                                                                if (r["kernel"], r["launch"]) == k])
                                 for k in sorted({(r["kernel"], r["launch"]) for r in dram_ok_l
                                                  if num(r, "dram_error_pct") is not None})}}


def _references(pts: list) -> list:
    refs = []
    for r in pts:
        e, s = num(r, "reference_eager_us"), num(r, "reference_sdpa_us")
        if e is None and s is None:
            continue
        refs.append({"point": int(num(r, "point")), "kernel": r["kernel"], "measured_us": num(r, "measured_us"),
                     "predicted_us": num(r, "predicted_us"), "eager_us": e, "sdpa_us": s})
    return refs


def analyze(rows: list) -> dict:
    """Summary of validation rows (as built, or as read back from validation.csv)."""
    pts = [r for r in rows if r.get("scope") == "point"]
    lns = [r for r in rows if r.get("scope") == "launch"]
    ok_p = [r for r in pts if r.get("status") == "ok" and num(r, "error_pct") is not None]
    ok_l = [r for r in lns if r.get("status") == "ok" and num(r, "error_pct") is not None]
    summary = {"counts": {"points": len(pts), "launch_rows": len(lns),
                          "by_status": dict(Counter(r.get("status", "") for r in pts)),
                          "compared_points": len(ok_p), "compared_launches": len(ok_l)},
               "time_error": _time_error(ok_p, ok_l)}
    summary["tile_groups"], summary["tile_summary"] = _tile_groups(ok_p)
    summary["dram"] = _dram(pts, lns)
    summary["reference"] = _references(pts)
    summary["problems"] = [{"point": int(num(r, "point")), "kernel": r["kernel"], "status": r.get("status"),
                            "reason": r.get("reason", "")} for r in pts if r.get("status") != "ok"]
    return summary
