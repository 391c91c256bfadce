"""Roofline charts: ``roofline_<gpu>.<fmt>``, one per GPU in the run.

Every ok point is placed at (FLOP per DRAM byte, achieved FLOP/s) under the slopes of that GPU's HBM,
L2 and on-chip load bandwidth and the flat tensor-core / FP32 ceilings, all read from its config.
Point labels that would overlap are moved, or hidden and counted in the subtitle.
"""
from __future__ import annotations

from pathlib import Path

from .points import distinct, dram_bytes, fmt_rate, is_ok, num, point_label, pval, safe_name, sweep_axis, varying, warn
from .style import (HBM_COLOR, L2_COLOR, color, drop_overlapping_labels, eng_log_axis, figure, plain_log_formatter,
                    save, titles, wrap)

SRAM_COLOR, TENSOR_COLOR, FP32_COLOR = "#27ae60", "#6c3483", "#7f8c8d"
MARKERS = "os^Dv<>p"
MAX_LABELS = 24       # beyond this many points, labels crowd into a fan of leader lines: label the fastest only
# where a point label may go, in points from its marker: beside it first, then further above / below
LABEL_OFFSETS = [(8, 6), (8, -6), (-8, 6), (-8, -6)] + [(sx * 10, dy) for dy in (18, -18, 30, -30, 42, -42)
                                                          for sx in (1, -1)]


def rooflines(out: Path, rows, param_names, fmt="png", sweep_order=()) -> list:
    """roofline_<gpu>.<fmt>: arithmetic intensity vs achieved FLOP/s under the config's roofs."""
    from ..hardware import load_gpu

    axis = sweep_axis(rows, param_names, sweep_order)
    others = varying(rows, param_names, exclude=(axis,) if axis else ())
    written = []
    for gpu in distinct(rows, "gpu"):
        pts = []
        for r in rows:
            if not is_ok(r) or str(pval(r.get("gpu"))) != str(gpu):
                continue
            flops, t, b = num(r.get("flops")), num(r.get("time_us")), dram_bytes(r)
            if not flops or not t or not b:
                continue
            pts.append((flops / b, flops / (t * 1e-6), r))
        if not pts:
            continue
        try:
            cfg = load_gpu(str(gpu))
        except Exception as e:
            warn(f"roofline for {gpu}: cannot load config: {e}")
            continue
        cfg, whatif = what_if_config(cfg, [r for *_, r in pts])
        written.append(roofline_one(out, cfg, pts, axis, others, fmt, whatif))
    return written


# the GPU fields the roofs are drawn from
ROOF_FIELDS = ("hbm_read_bandwidth_bytes_per_s", "l2_bandwidth_bytes_per_s", "sm_count", "sm_load_bytes_per_clk",
               "clock_hz", "tensor_flops_per_s", "fp32_flops_per_s")


def what_if_config(cfg, rows) -> tuple:
    """(``cfg`` with the ``gpu.<field>`` values every row shares applied, a note for the subtitle):
    the roofs of a what-if are the changed GPU's. A roof field that differs between the points
    cannot be drawn as one roof; the note says so."""
    from ..overrides import with_overrides

    common, differ = {}, []
    for c in dict.fromkeys(c for r in rows for c in r if isinstance(c, str) and c.startswith("gpu.")):
        vals = distinct(rows, c)
        if len(vals) == 1 and isinstance(vals[0], (int, float)) and not isinstance(vals[0], bool):
            common[c[4:]] = vals[0]
        elif len(vals) > 1 and c[4:] in ROOF_FIELDS:
            differ.append(c)
    notes = []
    if common:
        try:
            cfg, _ = with_overrides(cfg, common, "gpu")
            notes.append("what-if: " + ", ".join(f"{k}={v:g}" for k, v in common.items()))
        except Exception as e:      # rows read back from elsewhere: draw the named config's roofs, and say so
            notes.append(f"roofs of {cfg.name} as named (the what-if fields do not apply: {type(e).__name__})")
    if differ:
        notes.append(f"roofs of {cfg.name} without {', '.join(differ)}, which differs between the points")
    return cfg, "; ".join(notes)


def roofs(cfg, dtypes) -> tuple:
    """([(bytes/s, colour, label)] slopes, {tensor FLOP/s: [dtypes]}, top ceiling FLOP/s) of ``cfg``."""
    hbm = cfg.hbm_read_bandwidth_bytes_per_s
    l2 = cfg.l2_bandwidth_bytes_per_s
    sram = cfg.sm_count * cfg.sm_load_bytes_per_clk * cfg.clock_hz
    tensor = {}
    for dt in dtypes:
        if dt in cfg.tensor_flops_per_s:
            tensor.setdefault(cfg.tensor_flops_per_s[dt], []).append(dt)
    top = max(list(tensor) + [cfg.fp32_flops_per_s])
    slopes = [(hbm, HBM_COLOR, f"HBM  {fmt_rate(hbm, 'B/s')}  (ridge {top / hbm:.0f} FLOP/B)"),
              (l2, L2_COLOR, f"L2  {fmt_rate(l2, 'B/s')}"),
              (sram, SRAM_COLOR, f"on-chip load: {cfg.sm_count} SMs × {cfg.sm_load_bytes_per_clk:.4g} B/clk × "
                                 f"{cfg.clock_hz / 1e9:.2f} GHz = {fmt_rate(sram, 'B/s')}")]
    return slopes, tensor, top


def _draw_roofs(ax, cfg, slopes, tensor, top, x) -> list:
    """The bandwidth slopes (up to the top roof), the tensor peaks and the FP32 ceiling; their legend handles."""
    from matplotlib.lines import Line2D

    handles = []
    for bw, col, label in slopes:
        y = bw * x
        keep = y <= top
        ax.plot(x[keep], y[keep], color=col, lw=2)
        handles.append(Line2D([], [], color=col, lw=2, label=label))
    for i, (peak, names) in enumerate(sorted(tensor.items(), reverse=True)):
        ls = ("-", "-.", ":")[i % 3]
        ax.axhline(peak, color=TENSOR_COLOR, lw=2, ls=ls)
        handles.append(Line2D([], [], color=TENSOR_COLOR, lw=2, ls=ls,
                              label=f"tensor peak ({'/'.join(names)})  {fmt_rate(peak, 'FLOP/s')}"))
    ax.axhline(cfg.fp32_flops_per_s, color=FP32_COLOR, lw=2, ls="--")
    handles.append(Line2D([], [], color=FP32_COLOR, lw=2, ls="--",
                          label=f"FP32 (non-tensor)  {fmt_rate(cfg.fp32_flops_per_s, 'FLOP/s')}"))
    return handles


def _draw_points(ax, pts, axis, others, labelled, handles: list) -> list:
    """The points, one marker and colour per kernel (their handles appended to ``handles``), and the
    labels of the ``labelled`` ones; returns the label texts."""
    from matplotlib.lines import Line2D

    kernels = list(dict.fromkeys(str(r.get("kernel")) for *_, r in pts))
    texts = []
    for ki, k in enumerate(kernels):
        sel = [(a, p, r) for a, p, r in pts if str(r.get("kernel")) == k]
        ax.scatter([a for a, _, _ in sel], [p for _, p, _ in sel], s=46, zorder=5, color=color(ki, len(kernels)),
                   marker=MARKERS[ki % len(MARKERS)], edgecolor="black", linewidth=0.6)
        handles.append(Line2D([], [], ls="", marker=MARKERS[ki % len(MARKERS)], color=color(ki, len(kernels)),
                              markeredgecolor="black", ms=7, label=k))
        for a, p, r in sel:
            if id(r) not in labelled:
                continue
            texts.append(ax.annotate(point_label(r, axis, others), (a, p), xytext=(6, 4), textcoords="offset points",
                                     fontsize=7.5, color="#222", zorder=6, va="center",
                                     bbox=dict(boxstyle="square,pad=0.1", fc="white", ec="none", alpha=0.75),
                                     arrowprops=dict(arrowstyle="-", color="#999", lw=0.6, shrinkA=1, shrinkB=4)))
    return texts


def roofline_one(out, cfg, pts, axis, others, fmt, whatif: str = "") -> Path:
    """One GPU's roofline with ``pts`` = [(FLOP/B, FLOP/s, row)]."""
    import numpy as np

    dtypes = sorted({str(pval(r.get("dtype", ""))) for *_, r in pts} - {""}) or ["fp16"]
    slopes, tensor, top = roofs(cfg, dtypes)
    hbm, sram = slopes[0][0], slopes[2][0]
    ais = [p[0] for p in pts]
    perf = [p[1] for p in pts]
    xlo = min(min(ais) / 3, top / sram / 10)
    xhi = max(max(ais) * 3, top / hbm * 4)
    ylo = min(min(perf) / 3, cfg.fp32_flops_per_s / 10)
    yhi = top * 2.5

    fig = figure(10, 6.6)
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    handles = _draw_roofs(ax, cfg, slopes, tensor, top, np.geomspace(xlo, xhi, 200))
    labelled, which = labelled_points(pts, axis)
    texts = _draw_points(ax, pts, axis, others, labelled, handles)
    ax.set_xlim(xlo, xhi)
    ax.set_ylim(ylo, yhi)
    eng_log_axis(ax.yaxis, "FLOP/s")
    ax.xaxis.set_major_formatter(plain_log_formatter())
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", alpha=0.1)
    ax.set_xlabel("arithmetic intensity (FLOP per DRAM byte, read + write)")
    ax.set_ylabel("achieved FLOP/s")
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0,
              title="roofs and ceilings / points", title_fontsize=8.5)
    dropped = drop_overlapping_labels(fig, texts, LABEL_OFFSETS, ax, [(a, p) for a, p, _ in pts])
    note = cfg.description + (f" — {whatif}" if whatif else "")
    if which:
        note += f" — labelled: {which}"
    if dropped:
        note += f" — {dropped} point label(s) hidden where they would overlap"
    titles(ax, f"Roofline — {cfg.name}", wrap(note))
    return save(fig, out, f"roofline_{safe_name(cfg.name)}", fmt)


def labelled_points(pts, axis) -> tuple:
    """(ids of the rows whose points get a label, '' or what the labelled ones are).

    Every point up to ``MAX_LABELS``; beyond, the fastest point per kernel and value of the sweep
    axis, or if that is still too many, the fastest point per kernel."""
    if len(pts) <= MAX_LABELS:
        return {id(r) for *_, r in pts}, ""
    for keys, what in (((axis,), f"the fastest point per kernel and {axis}"), ((), "the fastest point per kernel")):
        if axis is None and keys:
            continue
        best = {}
        for _, perf, r in pts:
            k = (str(r.get("kernel")),) + tuple(str(pval(r.get(n, ""))) for n in keys)
            if k not in best or perf > best[k][0]:
                best[k] = (perf, r)
        if len(best) <= MAX_LABELS or not keys:
            return {id(r) for _, r in best.values()}, what
    return set(), ""
