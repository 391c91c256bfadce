"""The report of a validation: ``validation.csv``, ``summary.md``, ``summary.json`` and two plots.

Owns the summary markdown, the measured-vs-predicted scatter and the error-by-point bar plot
(matplotlib imported on use), ``write_report`` and the table printed on the terminal.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from .common import atomic_write, error_text, log
from .rows import cell, num, param_columns, rows_to_csv


def fmt(x, spec="{:.1f}"):
    """``x`` formatted, or "" for None."""
    return "" if x is None else spec.format(x)


def varying_params(pts: list) -> list:
    cols = param_columns(pts)
    return [c for c in cols if len({str(r.get(c)) for r in pts}) > 1]


def _short(r, varying) -> str:
    vals = []
    for c in varying:
        v = r.get(c)
        if v in (None, ""):
            continue
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        vals.append(f"{c}={v}")
    return " ".join(vals)


METHOD = [
    "- Measured: `triton.testing.do_bench` median (L2 cleared before every repetition) of the generated Triton "
    "code, on two random-normal input sets; the number is the median of the two, the spread their difference. "
    "A point whose outputs miss the float64 reference (max_rel_err > 5e-3 fp16, 2e-2 bf16, 1e-2 fp32; large "
    "problems checked on sampled rows) is wrong-result and not timed.",
    "- Per point: the whole launch sequence, L2 cleared once before it (as the simulator starts cold). "
    "Per launch: each launch timed alone with a cleared L2, while the simulator's per-launch time is inside "
    "the sequence (L2 warm from the previous launch): multi-launch workloads differ there by design.",
    "- DRAM bytes: ncu `dram__bytes_read.sum`, `dram__bytes_write.sum` (ncu's default cache control flushes "
    "caches before each profiled kernel, so each launch starts cold), `--clock-control none`.",
    "- Spearman: rank correlation of predicted vs measured time inside each tile-sweep group (ties get average "
    "ranks; groups of 2 are listed but left out of the mean)."]


def _error_line(name, s) -> str:
    return (f"| {name} | {s['n']} | {fmt(s['median_abs_pct'])} | {fmt(s['p90_abs_pct'])} | "
            f"{fmt(s['mean_signed_pct'], '{:+.1f}')} | {fmt(s['max_abs_pct'])} |")


def _counts_and_time(summary: dict) -> list:
    c = summary["counts"]
    L = ["## Counts", "", f"{c['points']} points ({c['launch_rows']} launch rows); compared: {c['compared_points']} "
         f"points, {c['compared_launches']} launches.", "",
         "| status | points |", "| --- | --- |"]
    L += [f"| {k} | {v} |" for k, v in sorted(c["by_status"].items())]
    L += ["", "## Time error, (predicted - measured) / measured", "",
          "| scope | n | median abs % | p90 abs % | mean signed % | max abs % |", "| --- | --- | --- | --- | --- | --- |"]
    te = summary["time_error"]
    L.append(_error_line("per point", te["point"]))
    L.append(_error_line("per launch", te["launch"]))
    L += [_error_line(f"point: {k}", s) for k, s in te["point_by_kernel"].items()]
    L += [_error_line(f"launch: {k}", s) for k, s in te["launch_by_kernel"].items()]
    return L


def _tile_sweeps(summary: dict) -> list:
    ts = summary["tile_summary"]
    L = ["", "## Tile sweeps (points differing only in BLOCK_*/num_stages/num_warps)", ""]
    if not ts["groups"]:
        return L + ["No group has two or more compared points."]
    L.append(f"{ts['groups']} groups; Spearman (groups of 3+): mean {fmt(ts['mean_spearman'], '{:.3f}')}, "
             f"median {fmt(ts['median_spearman'], '{:.3f}')}; simulator's pick is the measured best in "
             f"{ts['sim_pick_is_best']}/{ts['groups']}, within 5% of it in {ts['sim_pick_within_5pct']}/{ts['groups']}.")
    L += ["", "| group | n | Spearman | measured best | simulator pick | pick's loss % |", "| --- | --- | --- | --- | --- | --- |"]
    for g in summary["tile_groups"]:
        L.append(f"| {g['group']} | {g['n']} | {fmt(g['spearman'], '{:.3f}')} | p{g['measured_best_point']} "
                 f"{g['measured_best_tile']} ({g['measured_best_us']:.1f} us) | p{g['sim_best_point']} "
                 f"{g['sim_best_tile']} | {g['sim_pick_loss_pct']:.1f} |")
    return L


def _dram(summary: dict, meta: dict) -> list:
    d = summary["dram"]
    L = ["", "## DRAM bytes, simulator vs ncu (read + write)", ""]
    if d["point"]["n"] or d["launch"]["n"]:
        L += ["| scope | n | median abs % | p90 abs % | mean signed % | read median abs % | write median abs % |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
        for name, s in [("per point", d["point"]), ("per launch", d["launch"])] + \
                       [(f"launch: {k}", s) for k, s in d["launch_by_kernel"].items()]:
            L.append(f"| {name} | {s['n']} | {fmt(s['median_abs_pct'])} | {fmt(s['p90_abs_pct'])} | "
                     f"{fmt(s['mean_signed_pct'], '{:+.1f}')} | {fmt(s['read']['median_abs_pct'])} | "
                     f"{fmt(s['write']['median_abs_pct'])} |")
    else:
        L.append("No ncu counters (ncu not run, not available, or every point skipped).")
    nm = meta.get("ncu") or {}
    if nm.get("disabled"):
        L.append(f"\nncu: {nm['disabled']}")
    if meta.get("ncu_skipped"):
        L.append(f"\nncu skipped (cap --ncu-max / GPUSIM_NCU_MAX = {meta.get('ncu_max')}): points "
                 f"{', '.join(f'p{i}' for i in meta['ncu_skipped'])}")
    return L


def _references(summary: dict) -> list:
    if not summary["reference"]:
        return []
    L = ["", "## PyTorch references (attention)", "", "| point | kernel | measured us | predicted us | eager us | "
         "SDPA flash us |", "| --- | --- | --- | --- | --- | --- |"]
    for r in summary["reference"]:
        L.append(f"| p{r['point']} | {r['kernel']} | {fmt(r['measured_us'])} | {fmt(r['predicted_us'])} | "
                 f"{fmt(r['eager_us'])} | {fmt(r['sdpa_us'])} |")
    return L


def _points(pts: list, varying: list) -> list:
    L = ["", "## Points", "", "| point | kernel | " + " | ".join(varying) +
         " | status | measured us | spread % | predicted us | error % | DRAM error % | max_rel_err |",
         "| --- | --- | " + " | ".join("---" for _ in varying) + " | --- | --- | --- | --- | --- | --- | --- |"]
    for r in pts:
        vals = " | ".join(str(cell(r.get(v))) for v in varying)
        L.append(f"| p{int(num(r, 'point'))} | {r['kernel']} | {vals} | {r.get('status')} | "
                 f"{fmt(num(r, 'measured_us'))} | {fmt(num(r, 'measured_spread_pct'))} | {fmt(num(r, 'predicted_us'))} | "
                 f"{fmt(num(r, 'error_pct'), '{:+.1f}')} | {fmt(num(r, 'dram_error_pct'), '{:+.1f}')} | "
                 f"{fmt(num(r, 'max_rel_err'), '{:.2g}')} |")
    return L


def summary_markdown(rows: list, summary: dict, meta: dict | None = None) -> str:
    """``summary.md``: counts, time and DRAM errors, tile sweeps, references, every point, the method."""
    meta = meta or {}
    pts = [r for r in rows if r.get("scope") == "point"]
    L = [f"# Validation: {meta.get('scenario_name', '?')} on {meta.get('gpu', pts[0]['gpu'] if pts else '?')}", ""]
    if meta:
        L.append(f"GPU config `{meta.get('gpu')}` (hash {meta.get('gpu_config_hash', '?')}, from "
                 f"{meta.get('gpu_config_source', '?')}); measured on {meta.get('environment', {}).get('device', '?')} "
                 f"({meta.get('started', '')} .. {meta.get('finished', '')}).")
        L.append("")
    L += _counts_and_time(summary) + _tile_sweeps(summary) + _dram(summary, meta) + _references(summary)
    L += _points(pts, varying_params(pts))
    if summary["problems"]:
        L += ["", "## Problems", ""]
        L += [f"- p{p['point']} {p['kernel']}: {p['status']}: {p['reason']}" for p in summary["problems"]]
    L += ["", "## Method", ""] + METHOD
    return "\n".join(L) + "\n"


def _scatter_axis(ax, plt, rows: list, scope: str, title: str) -> None:
    """Predicted against measured time of the compared rows of one scope, log-log, with ±15/30% bands."""
    rs = [r for r in rows if r.get("scope") == scope and r.get("status") == "ok"
          and (num(r, "measured_us") or 0) > 0 and (num(r, "predicted_us") or 0) > 0]
    labels = sorted({r["kernel"] if scope == "point" else f"{r['kernel']}/{r['launch']}" for r in rs})
    cmap = plt.get_cmap("tab10" if len(labels) <= 10 else "tab20")
    for i, lab in enumerate(labels):
        sel = [r for r in rs if (r["kernel"] if scope == "point" else f"{r['kernel']}/{r['launch']}") == lab]
        ax.scatter([num(r, "measured_us") for r in sel], [num(r, "predicted_us") for r in sel], s=28,
                   color=cmap(i % cmap.N), label=lab, alpha=0.85, edgecolors="none")
    if rs:
        vals = [num(r, k) for r in rs for k in ("measured_us", "predicted_us")]
        lo, hi = min(vals) / 1.5, max(vals) * 1.5
        x = np.geomspace(lo, hi, 50)
        ax.fill_between(x, x * 0.7, x * 1.3, color="0.85", label="±30%", zorder=0)
        ax.fill_between(x, x * 0.85, x * 1.15, color="0.7", label="±15%", zorder=0)
        ax.plot(x, x, "k-", lw=1, label="y = x")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.legend(fontsize=7, loc="upper left")
    else:
        ax.text(0.5, 0.5, "no compared rows", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("measured (us)")
    ax.set_ylabel("predicted (us)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)


def _error_bars(ax, plt, pts: list) -> None:
    """One bar per point: its time error, or its status in red when it was not compared."""
    varying = varying_params(pts)
    kernels = sorted({r["kernel"] for r in pts})
    cmap = plt.get_cmap("tab10")
    xs = np.arange(len(pts))
    for i, r in enumerate(pts):
        e = num(r, "error_pct")
        col = cmap(kernels.index(r["kernel"]) % 10)
        if r.get("status") == "ok" and e is not None:
            ax.bar(i, e, color=col)
        else:
            ax.text(i, 0, r.get("status", "?"), rotation=90, ha="center", va="bottom", fontsize=7, color="red")
    for k in kernels:
        ax.bar(0, 0, color=cmap(kernels.index(k) % 10), label=k)
    for y, st in ((15, "--"), (30, ":")):
        ax.axhline(y, color="0.5", ls=st, lw=1)
        ax.axhline(-y, color="0.5", ls=st, lw=1)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(xs)
    ax.set_xticklabels([f"p{int(num(r, 'point'))} {_short(r, varying)}" for r in pts], rotation=75, ha="right",
                       fontsize=7)
    ax.set_ylabel("time error %")
    ax.set_title("(predicted - measured) / measured per point (dashed ±15%, dotted ±30%)")
    ax.legend(fontsize=7)


def _plots(out_dir: Path, rows: list) -> list:
    """scatter.png (per point and per launch) and error_by_point.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5))
    _scatter_axis(axes[0], plt, rows, "point", "per point (whole launch sequence)")
    _scatter_axis(axes[1], plt, rows, "launch", "per launch")
    fig.tight_layout()
    scatter = out_dir / "scatter.png"
    fig.savefig(scatter, dpi=110)
    plt.close(fig)

    pts = [r for r in rows if r.get("scope") == "point"]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(pts) + 2), 5))
    _error_bars(ax, plt, pts)
    fig.tight_layout()
    bars = out_dir / "error_by_point.png"
    fig.savefig(bars, dpi=110)
    plt.close(fig)
    return [scatter, bars]


def write_report(out_dir, rows: list, summary: dict, meta: dict | None = None) -> list:
    """validation.csv, summary.md, summary.json, scatter.png, error_by_point.png in ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    atomic_write(out / "validation.csv", rows_to_csv(rows))
    written.append(out / "validation.csv")
    atomic_write(out / "summary.json", json.dumps(summary, indent=1, default=str))
    written.append(out / "summary.json")
    atomic_write(out / "summary.md", summary_markdown(rows, summary, meta))
    written.append(out / "summary.md")
    try:
        written += _plots(out, rows)
    except Exception as e:  # plots are a convenience; the CSV and summary stand without them
        log(f"plots failed: {error_text(e)}")
    return written


def print_table(rows: list) -> None:
    """The point rows as an aligned table on stdout."""
    pts = [r for r in rows if r.get("scope") == "point"]
    varying = varying_params(pts)
    hdr = ["point", "kernel"] + varying + ["status", "measured_us", "predicted_us", "error_%", "dram_err_%"]
    table = [[f"p{r['point']}", r["kernel"]] + [str(cell(r.get(v))) for v in varying] +
             [r["status"], fmt(r.get("measured_us")), fmt(r.get("predicted_us")), fmt(r.get("error_pct"), "{:+.1f}"),
              fmt(r.get("dram_error_pct"), "{:+.1f}")] for r in pts]
    w = [max(len(h), *(len(x[i]) for x in table)) if table else len(h) for i, h in enumerate(hdr)]
    print("  ".join(h.rjust(wi) for h, wi in zip(hdr, w)))
    for line in table:
        print("  ".join(c.rjust(wi) for c, wi in zip(line, w)))
    sys.stdout.flush()
