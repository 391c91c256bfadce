"""Plots for a finished scenario run: ``make_reports`` picks the ones that apply and writes them.

This module owns the figures ``gpusim run`` writes next to results.csv:

* ``plot_<metric>.png`` + ``plot_<metric>.csv``: time, TFLOP/s and DRAM bytes against the swept
  axis, one line per (kernel, gpu, other varying parameters), with the pivot table beside it;
* ``roofline_<gpu>.png``: every ok point against the HBM, L2 and on-chip load slopes and the
  tensor / FP32 ceilings of that GPU's config;
* ``traffic.png``: bytes across HBM<->L2 and L2->SM per launch, naive vs flash attention;
* ``tile_heatmap.png``: time per (BLOCK_M, BLOCK_N) with the best cell boxed and infeasible
  cells hatched.

Inputs are results.csv / kernels.csv rows as dicts; values may be numbers or strings. Rows whose
status is not ok carry no metrics and are left out (the heatmap shows them as hatched cells).
A plot that does not apply is skipped; a plot that fails is reported on stderr and skipped, so
reporting never fails a run. Figures are drawn with matplotlib's object API on the Agg canvas.
"""
from __future__ import annotations

import csv
import math
import re
import sys
import textwrap
from pathlib import Path

ATTENTION = ("attention_naive", "attention_flash")
SHORT = {"attention_naive": "naive", "attention_flash": "flash", "elementwise_chain": "chain",
         "elementwise_fused": "fused", "matmul": "matmul"}
ABBREV = {"seq_len": "N", "BLOCK_M": "BM", "BLOCK_N": "BN", "BLOCK_K": "BK", "num_stages": "stages",
          "num_warps": "warps", "head_dim": "d", "batch": "B", "heads": "H"}
METRICS = (
    # file stem, title, y label, log y, value(row)
    ("time_us", "Time", "time (µs)", True, lambda r: _num(r.get("time_us"))),
    ("tflops", "Throughput", "achieved TFLOP/s", False, lambda r: _num(r.get("tflops"))),
    ("dram_bytes", "DRAM traffic", "DRAM bytes (read + write)", True,
     lambda r: _sum_or_none(_num(r.get("dram_read_bytes")), _num(r.get("dram_write_bytes")))),
)
HBM_COLOR, L2_COLOR = "#c0392b", "#2e86c1"
LINESTYLES = ("-", "--", ":", "-.")      # one per GPU, so the same kernel on two GPUs stays visible


# --------------------------------------------------------------------------- values
def _num(v):
    """A finite float from a number or numeric string, else None."""
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _sum_or_none(*xs):
    return None if any(x is None for x in xs) else sum(xs)


def _pval(v):
    """A parameter value normalised for grouping and sorting: int, float, bool or str ('' = not taken)."""
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return int(v) if float(v).is_integer() else float(v)
    s = "" if v is None else str(v).strip()
    if s.lower() in ("true", "false"):
        return s.lower() == "true"
    for conv in (int, float):
        try:
            return conv(s)
        except ValueError:
            pass
    return s


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _sort_key(v):
    return (0, v, "") if _is_number(v) else (1, 0, str(v))


def _ok(r) -> bool:
    return str(r.get("status", "")).strip() == "ok"


def _fmt_val(v) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _fmt_bytes(b: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(b) >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b:.0f} B"


def _fmt_rate(x: float, unit: str) -> str:
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if x >= scale:
            return f"{x / scale:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def _is_pow2(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0 and v & (v - 1) == 0


def _distinct(rows, name) -> list:
    """Distinct non-empty values of ``name`` over ``rows``, sorted."""
    vals = {_pval(r.get(name, "")) for r in rows}
    vals.discard("")
    return sorted(vals, key=_sort_key)


def _param_help(name: str) -> str:
    from ..kernels import KERNELS

    for spec in KERNELS.values():
        p = spec.param(name)
        if p is not None:
            return p.help
    return ""


def _safe_name(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(str(s)).stem if str(s).endswith((".yaml", ".yml")) else str(s))


# --------------------------------------------------------------------------- figures
def _figure(w: float, h: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=120)
    FigureCanvasAgg(fig)
    return fig


def _save(fig, out: Path, stem: str, fmt: str) -> Path:
    path = Path(out) / f"{stem}.{fmt}"
    fig.savefig(path, format=fmt, bbox_inches="tight")
    return path


def titles(ax, title: str, subtitle: str = "", size: float = 13, sub_size: float = 9, pad: float = 6):
    """A bold title above a smaller grey subtitle of any number of lines, both centred on ``ax``."""
    lines = subtitle.count("\n") + 1 if subtitle else 0
    ax.set_title(subtitle, fontsize=sub_size, color="#444", pad=pad)
    ax.annotate(title, (0.5, 1.0), xycoords="axes fraction", xytext=(0, pad + lines * sub_size * 1.25 + 3),
                textcoords="offset points", ha="center", va="bottom", fontsize=size, fontweight="bold")


def _wrap(s: str, width: int = 110) -> str:
    return "\n".join(textwrap.wrap(s, width)) if s else ""


def _drop_overlapping_labels(fig, texts, offsets, ax=None, points=()) -> int:
    """Move each annotation through candidate ``offsets`` until it overlaps no earlier one and no marker
    at ``points`` (data coordinates of ``ax``); drop it if none fits. Returns how many were dropped."""
    from matplotlib.text import Text
    from matplotlib.transforms import Bbox

    if not texts:
        return 0
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    placed, dropped = [], 0
    r = 4 * fig.dpi / 72
    for x, y in (ax.transData.transform(points) if ax is not None and len(points) else []):
        placed.append(Bbox.from_extents(x - r, y - r, x + r, y + r))
    frame = ax.get_window_extent(renderer) if ax is not None else None
    for t in texts:
        for off in offsets:
            t.xyann = off
            t.set_ha("left" if off[0] >= 0 else "right")
            box = Text.get_window_extent(t, renderer).expanded(1.05, 1.15)     # the text, not its leader line
            inside = frame is None or (frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0
                                       and box.y1 <= frame.y1)
            if inside and not any(box.overlaps(p) for p in placed):
                placed.append(box)
                break
        else:
            t.remove()
            dropped += 1
    return dropped


def _constants_line(rows, names, skip=()) -> str:
    """'gpu h100 · batch=4 heads=16 ...' for the fields every row shares."""
    head = [str(_distinct(rows, f)[0]) for f in ("gpu", "kernel") if f not in skip and len(_distinct(rows, f)) == 1]
    n_kernels = len(_distinct(rows, "kernel"))
    common, partial = [], {}
    for n in names:
        vals = _distinct(rows, n)
        if n in skip or len(vals) != 1:
            continue
        takers = tuple(_distinct([r for r in rows if _pval(r.get(n, "")) != ""], "kernel"))
        item = f"{n}={_fmt_val(vals[0])}"
        if len(takers) == n_kernels:
            common.append(item)
        else:
            partial.setdefault(takers, []).append(item)
    parts = head + ([" ".join(common)] if common else [])
    parts += [f"{'/'.join(SHORT.get(str(k), str(k)) for k in t)} only: {' '.join(p)}" for t, p in partial.items()]
    return " · ".join(parts)


# --------------------------------------------------------------------------- sweep structure
def sweep_axis(rows, param_names, sweep_order=()):
    """The swept parameter with the most distinct values (ties: numeric first, then scenario order), or None."""
    cands = []
    order = list(sweep_order) + [p for p in param_names if p not in sweep_order]
    for i, n in enumerate(order):
        if n in ("gpu", "kernel") or n not in param_names:
            continue
        vals = _distinct(rows, n)
        if len(vals) > 1:
            cands.append((len(vals), all(_is_number(v) for v in vals), -i, n))
    return max(cands)[3] if cands else None


def _varying(rows, param_names, exclude=()) -> list:
    out = [n for n in ("gpu",) if len(_distinct(rows, n)) > 1]
    return out + [n for n in param_names if n not in exclude and len(_distinct(rows, n)) > 1]


def _series_label(r, varying, with_kernel: bool) -> str:
    parts = [str(r.get("kernel", ""))] if with_kernel else []
    for n in varying:
        v = _pval(r.get(n, ""))
        if v == "":
            continue
        parts.append(str(v) if n == "gpu" else f"{n}={_fmt_val(v)}")
    return " ".join(parts) or str(r.get("kernel", ""))


def _compact(v) -> str:
    """2^26 instead of 67108864 for large powers of two."""
    return f"2^{v.bit_length() - 1}" if _is_pow2(v) and v >= 1 << 16 else _fmt_val(v)


def _point_label(r, axis, varying) -> str:
    parts = [SHORT.get(str(r.get("kernel")), str(r.get("kernel")))]
    for n in ([axis] if axis else []) + [n for n in varying if n not in (axis, "gpu")]:
        v = _pval(r.get(n, ""))
        if v != "":
            parts.append(str(v) if n == "dtype" else f"{ABBREV.get(n, n)}={_compact(v)}")
    return " ".join(parts)


def _set_x_axis(ax, xs_all, categorical: bool):
    from matplotlib.ticker import NullLocator

    if categorical:
        ax.set_xticks(range(len(xs_all)))
        ax.set_xticklabels([_fmt_val(v) for v in xs_all])
        return
    pow2 = len(xs_all) > 1 and all(_is_pow2(v) for v in xs_all)
    big = max(xs_all) >= 100000
    if pow2:
        ax.set_xscale("log", base=2)
    elif all(v > 0 for v in xs_all) and max(xs_all) / min(xs_all) >= 16:
        ax.set_xscale("log")
    ticks = xs_all if len(xs_all) <= 12 else xs_all[::math.ceil(len(xs_all) / 12)]
    ax.set_xticks(ticks)
    if pow2 and big:
        ax.set_xticklabels([f"$2^{{{int(v).bit_length() - 1}}}$" for v in ticks])
    else:
        ax.set_xticklabels([_fmt_val(v) for v in ticks])
    ax.xaxis.set_minor_locator(NullLocator())


def _set_log_y(ax, engineering_unit=None):
    from matplotlib.ticker import EngFormatter, FuncFormatter, LogLocator, NullFormatter

    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    fmt = EngFormatter(unit=engineering_unit, places=0) if engineering_unit else FuncFormatter(lambda v, _: f"{v:g}")
    ax.yaxis.set_major_formatter(fmt)
    if hi / lo < 30:
        ax.yaxis.set_minor_locator(LogLocator(base=10, subs=(1.5, 2, 3, 5, 7) if hi / lo < 10 else (2, 3, 5)))
        minor = EngFormatter(unit=engineering_unit, places=0) if engineering_unit else FuncFormatter(lambda v, _: f"{v:g}")
        ax.yaxis.set_minor_formatter(minor)
    else:
        ax.yaxis.set_minor_formatter(NullFormatter())


# --------------------------------------------------------------------------- 1. metric vs sweep axis
def line_plots(out: Path, rows, param_names, fmt="png", sweep_order=()) -> list:
    """plot_<metric>.<fmt> + plot_<metric>.csv for each metric against the sweep axis."""
    axis = sweep_axis(rows, param_names, sweep_order)
    if axis is None:
        return []
    ok = [r for r in rows if _ok(r) and _pval(r.get(axis, "")) != ""]
    if not ok:
        return []
    varying = _varying(rows, param_names, exclude=(axis,))
    xs_all = _distinct(ok, axis)
    categorical = not all(_is_number(v) for v in xs_all)
    xpos = {v: (i if categorical else v) for i, v in enumerate(xs_all)}
    not_ok = [r for r in rows if not _ok(r)]
    missing_axis = [r for r in rows if _ok(r) and _pval(r.get(axis, "")) == ""]
    notes = []
    if not_ok:
        kinds = {}
        for r in not_ok:
            kinds[str(r.get("status") or "missing")] = kinds.get(str(r.get("status") or "missing"), 0) + 1
        notes.append("not shown: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) + " point(s)")
    if missing_axis:
        ks = sorted({str(r.get("kernel")) for r in missing_axis})
        notes.append(f"{', '.join(ks)} take(s) no {axis}: not shown")
    help_ = _param_help(axis)
    xlabel = f"{axis} ({help_})" if help_ else axis
    const = _constants_line(rows, param_names, skip=(axis,))
    with_kernel = len(_distinct(rows, "kernel")) > 1
    written = []
    for stem, title, ylabel, logy, value in METRICS:
        series, style = {}, {}      # label -> {x: y}; label -> (colour key, line-style key = gpu)
        for r in ok:
            y = value(r)
            if y is None or (logy and y <= 0):
                continue
            label = _series_label(r, varying, with_kernel)
            series.setdefault(label, {})[_pval(r[axis])] = y
            style.setdefault(label, (_series_label(r, [v for v in varying if v != "gpu"], with_kernel),
                                     str(r.get("gpu"))))
        if not series:
            continue
        colors = list(dict.fromkeys(c for c, _ in style.values()))
        dashes = list(dict.fromkeys(g for _, g in style.values()))
        fig = _figure(9, 5.4)
        ax = fig.add_subplot()
        markers = "osD^v<>ph*"
        for label, pts in series.items():
            xs = sorted(pts, key=_sort_key)
            ci, gi = colors.index(style[label][0]), dashes.index(style[label][1])
            ax.plot([xpos[x] for x in xs], [pts[x] for x in xs], marker=markers[ci % len(markers)],
                    ms=5 + 1.5 * (gi % 2), mfc="white" if gi % 2 else None, lw=1.6, label=label,
                    color=_color(ci, len(colors)), ls=LINESTYLES[gi % len(LINESTYLES)])
        _set_x_axis(ax, xs_all, categorical)
        if logy:
            _set_log_y(ax, "B" if stem == "dram_bytes" else None)
        else:
            ax.set_ylim(bottom=0)
        ax.grid(True, which="major", alpha=0.35)
        ax.grid(True, which="minor", alpha=0.12)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel + (" — log scale" if logy else ""))
        titles(ax, f"{title} vs {axis}", "\n".join(_wrap(x) for x in (const, "; ".join(notes)) if x))
        if len(series) <= 8:
            ax.legend(fontsize=8.5, loc="best", framealpha=0.9)
        else:
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        written.append(_save(fig, out, f"plot_{stem}", fmt))
        written.append(_write_pivot(Path(out) / f"plot_{stem}.csv", axis, xs_all, series))
    return written


def _color(i: int, n: int):
    from matplotlib import colormaps

    return colormaps["tab10"](i % 10) if n <= 10 else colormaps["tab20"](i % 20)


def _write_pivot(path: Path, axis: str, xs_all, series: dict) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow([axis] + list(series))
        for x in xs_all:
            w.writerow([_fmt_val(x)] + [("%.6g" % pts[x]) if x in pts else "" for pts in series.values()])
    return path


# --------------------------------------------------------------------------- 2. roofline
def rooflines(out: Path, rows, param_names, fmt="png", sweep_order=()) -> list:
    """roofline_<gpu>.<fmt>: arithmetic intensity vs achieved FLOP/s under the config's roofs."""
    from ..hardware import load_gpu

    axis = sweep_axis(rows, param_names, sweep_order)
    varying = _varying(rows, param_names, exclude=(axis,) if axis else ())
    written = []
    for gpu in _distinct(rows, "gpu"):
        pts = []
        for r in rows:
            if not _ok(r) or str(_pval(r.get("gpu"))) != str(gpu):
                continue
            flops, t = _num(r.get("flops")), _num(r.get("time_us"))
            b = _sum_or_none(_num(r.get("dram_read_bytes")), _num(r.get("dram_write_bytes")))
            if not flops or not t or not b:
                continue
            pts.append((flops / b, flops / (t * 1e-6), r))
        if not pts:
            continue
        try:
            cfg = load_gpu(str(gpu))
        except Exception as e:
            _warn(f"roofline for {gpu}: cannot load config: {e}")
            continue
        written.append(_roofline_one(out, cfg, pts, axis, varying, fmt))
    return written


def _roofline_one(out, cfg, pts, axis, varying, fmt) -> Path:
    import numpy as np
    from matplotlib.lines import Line2D

    dtypes = sorted({str(_pval(r.get("dtype", ""))) for *_, r in pts} - {""}) or ["fp16"]
    hbm = cfg.hbm_read_bandwidth_bytes_per_s
    l2 = cfg.l2_bandwidth_bytes_per_s
    sram = cfg.sm_count * cfg.sm_load_bytes_per_clk * cfg.clock_hz
    tensor = {}
    for dt in dtypes:
        if dt in cfg.tensor_flops_per_s:
            tensor.setdefault(cfg.tensor_flops_per_s[dt], []).append(dt)
    top = max(list(tensor) + [cfg.fp32_flops_per_s])
    ais = [p[0] for p in pts]
    perf = [p[1] for p in pts]
    xlo = min(min(ais) / 3, top / sram / 10)
    xhi = max(max(ais) * 3, top / hbm * 4)
    ylo = min(min(perf) / 3, cfg.fp32_flops_per_s / 10)
    yhi = top * 2.5

    fig = _figure(10, 6.6)
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    x = np.geomspace(xlo, xhi, 200)
    roofs = [(hbm, HBM_COLOR, f"HBM  {_fmt_rate(hbm, 'B/s')}  (ridge {top / hbm:.0f} FLOP/B)"),
             (l2, L2_COLOR, f"L2  {_fmt_rate(l2, 'B/s')}"),
             (sram, "#27ae60", f"on-chip load: {cfg.sm_count} SMs × {cfg.sm_load_bytes_per_clk:g} B/clk × "
                               f"{cfg.clock_hz / 1e9:.2f} GHz = {_fmt_rate(sram, 'B/s')}")]
    handles = []
    for bw, col, label in roofs:
        y = bw * x
        keep = y <= top
        ax.plot(x[keep], y[keep], color=col, lw=2)
        handles.append(Line2D([], [], color=col, lw=2, label=label))
    for i, (peak, names) in enumerate(sorted(tensor.items(), reverse=True)):
        ls = ("-", "-.", ":")[i % 3]
        ax.axhline(peak, color="#6c3483", lw=2, ls=ls)
        handles.append(Line2D([], [], color="#6c3483", lw=2, ls=ls,
                              label=f"tensor peak ({'/'.join(names)})  {_fmt_rate(peak, 'FLOP/s')}"))
    ax.axhline(cfg.fp32_flops_per_s, color="#7f8c8d", lw=2, ls="--")
    handles.append(Line2D([], [], color="#7f8c8d", lw=2, ls="--",
                          label=f"FP32 (non-tensor)  {_fmt_rate(cfg.fp32_flops_per_s, 'FLOP/s')}"))

    kernels = list(dict.fromkeys(str(r.get("kernel")) for *_, r in pts))
    markers = "os^Dv<>p"
    texts = []
    for ki, k in enumerate(kernels):
        sel = [(a, p, r) for a, p, r in pts if str(r.get("kernel")) == k]
        ax.scatter([a for a, _, _ in sel], [p for _, p, _ in sel], s=46, zorder=5, color=_color(ki, len(kernels)),
                   marker=markers[ki % len(markers)], edgecolor="black", linewidth=0.6)
        handles.append(Line2D([], [], ls="", marker=markers[ki % len(markers)], color=_color(ki, len(kernels)),
                              markeredgecolor="black", ms=7, label=k))
        for a, p, r in sel:
            texts.append(ax.annotate(_point_label(r, axis, varying), (a, p), xytext=(6, 4), textcoords="offset points",
                                     fontsize=7.5, color="#222", zorder=6, va="center",
                                     arrowprops=dict(arrowstyle="-", color="#999", lw=0.6, shrinkA=1, shrinkB=4)))
    ax.set_xlim(xlo, xhi)
    ax.set_ylim(ylo, yhi)
    _eng_log_axis(ax.yaxis, "FLOP/s")
    ax.xaxis.set_major_formatter(_plain_log_formatter())
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", alpha=0.1)
    ax.set_xlabel("arithmetic intensity (FLOP per DRAM byte, read + write)")
    ax.set_ylabel("achieved FLOP/s")
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0,
              title="roofs and ceilings / points", title_fontsize=8.5)
    offsets = [(8, 6), (8, -6), (-8, 6), (-8, -6)] + [(sx * 10, dy) for dy in (18, -18, 30, -30, 42, -42) for sx in (1, -1)]
    dropped = _drop_overlapping_labels(fig, texts, offsets, ax, [(a, p) for a, p, _ in pts])
    note = cfg.description
    if dropped:
        note += f" — {dropped} point label(s) hidden where they would overlap"
    titles(ax, f"Roofline — {cfg.name}", _wrap(note))
    return _save(fig, out, f"roofline_{_safe_name(cfg.name)}", fmt)


def _plain_log_formatter():
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda v, _: f"{v:g}")


def _eng_log_axis(axis, unit):
    from matplotlib.ticker import EngFormatter, NullFormatter

    axis.set_major_formatter(EngFormatter(unit=unit, places=0))
    axis.set_minor_formatter(NullFormatter())


# --------------------------------------------------------------------------- 3. attention traffic
SHARED_ATTN = ("gpu", "batch", "heads", "head_dim", "dtype")


def _attn_pick(rows) -> dict:
    """kernel -> row index of the representative point: the largest common seq_len, same shape, fastest config."""
    cand = {k: [i for i, r in enumerate(rows) if _ok(r) and r.get("kernel") == k and _pval(r.get("seq_len", "")) != ""]
            for k in ATTENTION}
    cand = {k: v for k, v in cand.items() if v}
    if not cand:
        return {}

    def key(i):
        return tuple(str(_pval(rows[i].get(n, ""))) for n in SHARED_ATTN)

    def fastest(idx):
        return min(idx, key=lambda i: (_num(rows[i].get("time_us")) or math.inf, i))

    if len(cand) == 2:
        common = []
        for i in cand["attention_flash"]:
            for j in cand["attention_naive"]:
                if key(i) == key(j) and _pval(rows[i]["seq_len"]) == _pval(rows[j]["seq_len"]):
                    common.append((_pval(rows[i]["seq_len"]), -min(i, j), key(i)))
        if common:
            n, _, k = max(common, key=lambda c: (_sort_key(c[0]), c[1]))
            return {kern: fastest([i for i in idx if key(i) == k and _pval(rows[i]["seq_len"]) == n])
                    for kern, idx in cand.items()}
    out = {}
    for kern, idx in cand.items():
        n = max((_pval(rows[i]["seq_len"]) for i in idx), key=_sort_key)
        at_n = [i for i in idx if _pval(rows[i]["seq_len"]) == n]
        first = key(at_n[0])
        out[kern] = fastest([i for i in at_n if key(i) == first])
    return out


def traffic_groups(rows, krows) -> tuple:
    """(kernel -> representative row index, [(kernel, launch, HBM<->L2 bytes, L2->SM bytes)] in launch order)."""
    pick = _attn_pick(rows)
    groups = []
    for kern in ATTENTION:
        if kern not in pick:
            continue
        for kr in krows:
            if _pval(kr.get("point", "")) != pick[kern]:
                continue
            hbm = _sum_or_none(_num(kr.get("dram_read_bytes")), _num(kr.get("dram_write_bytes")))
            l2 = _num(kr.get("l2_read_bytes"))
            if hbm is None or l2 is None:
                continue
            groups.append((kern, str(kr.get("launch", "?")), hbm, l2))
    return pick, groups


def traffic_chart(out: Path, rows, krows, fmt="png") -> list:
    """traffic.<fmt>: bytes across HBM<->L2 and L2->SM per launch for one naive and one flash point."""
    pick, groups = traffic_groups(rows, krows)
    if not groups:
        return []
    kerns = list(dict.fromkeys(g[0] for g in groups))
    xs, x = [], 0.0
    for i, g in enumerate(groups):
        if i and g[0] != groups[i - 1][0]:
            x += 0.7
        xs.append(x)
        x += 1.0
    vals = [v for g in groups for v in g[2:] if v > 0]
    logy = bool(vals) and max(vals) / min(vals) > 100
    w = 0.38
    fig = _figure(max(6.5, 1.35 * len(groups) + 3.5), 5.8)
    ax = fig.add_subplot()
    peak = max(max(g[2], g[3]) for g in groups)
    unit, GB = ("GB", 1e9) if peak >= 0.5e9 else ("MB", 1e6)
    bars_h = ax.bar([x - w / 2 for x in xs], [g[2] / GB for g in groups], w, color=HBM_COLOR,
                    label="HBM ↔ L2 (DRAM read + write)")
    bars_l = ax.bar([x + w / 2 for x in xs], [g[3] / GB for g in groups], w, color=L2_COLOR,
                    label="L2 → SM (bytes the SMs load through L2)")
    for bars, gi in ((bars_h, 2), (bars_l, 3)):
        for b, g in zip(bars, groups):
            ax.annotate(_fmt_bytes(g[gi]), (b.get_x() + b.get_width() / 2, b.get_height()), xytext=(0, 2),
                        textcoords="offset points", ha="center", va="bottom", fontsize=7.5, rotation=90 if
                        len(groups) > 6 else 0)
    if logy:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(_plain_log_formatter())
    ymax = peak / GB
    if logy:
        ax.set_ylim(min(vals) / GB / 3, ymax * 30)
    else:
        ax.set_ylim(0, ymax * 1.32)
    ax.set_xticks(xs)
    ax.set_xticklabels([g[1] for g in groups])
    ax.set_xlim(xs[0] - 0.5 - 0.6 * (len(groups) < 3), xs[-1] + 0.5 + 0.6 * (len(groups) < 3))
    ax.set_ylabel(f"bytes moved per launch ({unit})" + (" — log scale" if logy else ""))
    ax.grid(True, axis="y", alpha=0.3)
    totals = {}
    for kern in kerns:
        sel = [i for i, g in enumerate(groups) if g[0] == kern]
        th, tl = sum(groups[i][2] for i in sel), sum(groups[i][3] for i in sel)
        totals[kern] = (th, tl)
        mid = (xs[sel[0]] + xs[sel[-1]]) / 2
        r = rows[pick[kern]]
        cfg = " ".join(f"{ABBREV.get(n, n)}={_fmt_val(_pval(r.get(n)))}" for n in ("BLOCK_M", "BLOCK_N", "num_stages")
                       if _pval(r.get(n, "")) != "")
        ax.annotate(f"{kern} ({len(sel)} launch{'es' if len(sel) > 1 else ''}{', ' + cfg if cfg else ''})",
                    (mid, 0), xycoords=("data", "axes fraction"), xytext=(0, -30), textcoords="offset points",
                    ha="center", va="top", fontsize=9, fontweight="bold")
        ax.annotate(f"total: HBM↔L2 {_fmt_bytes(th)}\nL2→SM {_fmt_bytes(tl)}", (mid, 1), xycoords=("data", "axes fraction"),
                    xytext=(0, -6), textcoords="offset points", ha="center", va="top", fontsize=8.5,
                    bbox=dict(boxstyle="round,pad=0.3", fc="white", ec="#999"))
    r0 = rows[next(iter(pick.values()))]
    shape = ", ".join(f"{n}={_fmt_val(_pval(r0.get(n)))}" for n in ("seq_len", "batch", "heads", "head_dim", "dtype")
                      if _pval(r0.get(n, "")) != "")
    title = f"{' vs '.join(SHORT[k] for k in kerns)} attention: bytes across each memory boundary, per launch"
    sub = f"{r0.get('gpu')}, {shape}"
    if len(totals) == 2:
        (nh, _), (fh, _) = totals["attention_naive"], totals["attention_flash"]
        if fh > 0:
            sub += f" — flash moves {nh / fh:.0f}× fewer HBM bytes than naive"
    titles(ax, title, _wrap(sub))
    ax.legend(fontsize=8.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return [_save(fig, out, "traffic", fmt)]


# --------------------------------------------------------------------------- 4. tile heatmap
SRAM_REASON = re.compile(r"needs ([\d.]+ \w+) of SRAM per CTA, (\S+) allows ([\d.]+ \w+)")
MAX_PANELS = 4


def _short_reason(reason: str) -> str:
    m = SRAM_REASON.search(reason or "")
    if m:
        return f"needs\n{m.group(1)}"
    return "infeasible"


def _reason_caption(reasons) -> str:
    ms = [SRAM_REASON.search(r or "") for r in reasons]
    if ms and all(ms):
        gpus = sorted({m.group(2) for m in ms})
        allows = sorted({m.group(3) for m in ms})
        return (f"infeasible: needs more SRAM per CTA than {', '.join(gpus)} allows ({', '.join(allows)}); "
                f"the cell gives the need")
    first = (reasons[0] or "infeasible").split(" (")[0]
    return "infeasible: " + (first if len(first) < 90 else first[:87] + "...")


def tile_heatmap(out: Path, rows, param_names, fmt="png") -> list:
    """tile_heatmap.<fmt>: time per (BLOCK_M, BLOCK_N), one panel per combination of the other varying fields."""
    tiled = [r for r in rows if _pval(r.get("BLOCK_M", "")) != "" and _pval(r.get("BLOCK_N", "")) != ""]
    if len(_distinct(tiled, "BLOCK_M")) < 2 or len(_distinct(tiled, "BLOCK_N")) < 2:
        return []
    others = [n for n in ["kernel"] + _varying(tiled, param_names, exclude=("BLOCK_M", "BLOCK_N"))
              if len(_distinct(tiled, n)) > 1]
    combos = {}
    for r in tiled:
        combos.setdefault(tuple(_pval(r.get(n, "")) for n in others), []).append(r)
    shown = list(combos.items())[:MAX_PANELS]
    n = len(shown)
    ncols = 1 if n == 1 else 2
    nrows = math.ceil(n / ncols)
    fig = _figure(8.2 * ncols, 6.6 * nrows)
    axes = [fig.add_subplot(nrows, ncols, i + 1) for i in range(n)]
    reasons_all = []
    const = _wrap(_constants_line(tiled, param_names, skip=["BLOCK_M", "BLOCK_N"] + others), 90 if n == 1 else 150)
    for ax, (combo, rs) in zip(axes, shown):
        panel = ", ".join(f"{k}={_fmt_val(v)}" for k, v in zip(others, combo))
        reasons_all += _heatmap_panel(fig, ax, rs, panel if n > 1 else const)
    title = "Time per tile shape (BLOCK_M × BLOCK_N)"
    if n == 1:
        titles(axes[0], title, axes[0].get_title(), size=12.5)
    else:
        fig.suptitle(title + (f"\n{const}" if const else ""), fontsize=12.5, fontweight="bold")
    if len(combos) > MAX_PANELS:
        fig.text(0.5, 0.0, f"showing the first {MAX_PANELS} of {len(combos)} combinations of "
                           f"{', '.join(others)}", ha="center", va="top", fontsize=9, color="#a00")
    _heatmap_legend(fig, axes[-1], reasons_all)
    return [_save(fig, out, "tile_heatmap", fmt)]


def tile_grid(rs) -> tuple:
    """(BLOCK_M values, BLOCK_N values, (m, n) -> row, time grid [m, n] with NaN where not ok, best (i, j) or None)."""
    import numpy as np

    ms, ns = _distinct(rs, "BLOCK_M"), _distinct(rs, "BLOCK_N")
    cell = {(_pval(r["BLOCK_M"]), _pval(r["BLOCK_N"])): r for r in rs}
    grid = np.full((len(ms), len(ns)), np.nan)
    for (m, nn), r in cell.items():
        t = _num(r.get("time_us")) if _ok(r) else None
        if t is not None and t > 0:
            grid[ms.index(m), ns.index(nn)] = t
    best = tuple(int(x) for x in np.unravel_index(np.nanargmin(grid), grid.shape)) if np.isfinite(grid).any() else None
    return ms, ns, cell, grid, best


def _heatmap_panel(fig, ax, rs, panel_title) -> list:
    import numpy as np
    from matplotlib.colors import LogNorm, Normalize
    from matplotlib.patches import Rectangle

    ms, ns, cell, grid, best = tile_grid(rs)
    finite = grid[np.isfinite(grid)]
    reasons = []
    if finite.size:
        lo, hi = float(finite.min()), float(finite.max())
        norm = LogNorm(lo, hi) if hi / lo > 4 else Normalize(lo, hi if hi > lo else lo * 1.01)
        im = ax.imshow(np.ma.masked_invalid(grid), cmap="RdYlGn_r", norm=norm, aspect="auto")
        cb = fig.colorbar(im, ax=ax, fraction=0.05, pad=0.03)
        cb.set_label("time (µs), lower is better")
        cb.ax.yaxis.set_major_formatter(_plain_log_formatter())
        cb.ax.yaxis.set_minor_formatter(_plain_log_formatter() if hi / lo < 10 else _null_formatter())
    else:
        norm, im = None, None
        ax.imshow(np.zeros(grid.shape), cmap="Greys", vmin=0, vmax=1, aspect="auto")
    for i, m in enumerate(ms):
        for j, nn in enumerate(ns):
            r = cell.get((m, nn))
            if r is None:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fc="white", ec="#ccc"))
                ax.text(j, i, "not run", ha="center", va="center", fontsize=8, color="#999")
            elif np.isfinite(grid[i, j]):
                rgba = im.cmap(norm(grid[i, j]))
                lum = 0.299 * rgba[0] + 0.587 * rgba[1] + 0.114 * rgba[2]
                is_best = (i, j) == best
                ax.text(j, i, ("★ " if is_best else "") + f"{grid[i, j]:.3g}", ha="center", va="center",
                        fontsize=10 if is_best else 9, fontweight="bold" if is_best else "normal",
                        color="black" if lum > 0.5 else "white")
            else:
                status = str(r.get("status", ""))
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fc="#d5d5d5", ec="#888", hatch="///", lw=0.8))
                if status == "infeasible":
                    reasons.append(str(r.get("reason", "")))
                    label = _short_reason(str(r.get("reason", "")))
                else:
                    label = status or "missing"
                ax.text(j, i, label, ha="center", va="center", fontsize=8, color="#333",
                        bbox=dict(boxstyle="round,pad=0.15", fc="#eeeeee", ec="none", alpha=0.9))
    if best is not None:
        i, j = best
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="black", lw=3.0, zorder=5))
        panel_title = (panel_title + "\n" if panel_title else "") + \
            f"fastest: BLOCK_M={_fmt_val(ms[i])}, BLOCK_N={_fmt_val(ns[j])} at {grid[i, j]:.3g} µs"
    ax.set_xticks(range(len(ns)))
    ax.set_xticklabels([_fmt_val(v) for v in ns])
    ax.set_yticks(range(len(ms)))
    ax.set_yticklabels([_fmt_val(v) for v in ms])
    ax.set_xlim(-0.5, len(ns) - 0.5)
    ax.set_ylim(len(ms) - 0.5, -0.5)
    ax.set_xlabel("BLOCK_N (key rows / C columns per tile)")
    ax.set_ylabel("BLOCK_M (query rows / C rows per CTA)")
    ax.set_title(panel_title, fontsize=9.5, color="#333")
    return reasons


def _null_formatter():
    from matplotlib.ticker import NullFormatter

    return NullFormatter()


def _heatmap_legend(fig, ax, reasons):
    from matplotlib.patches import Patch

    handles = [Patch(fill=False, ec="black", lw=2.5, label="★ fastest cell")]
    if reasons:
        handles.append(Patch(fc="#d5d5d5", ec="#888", hatch="///", label="grey = " + _reason_caption(reasons)))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.12), fontsize=8.5, frameon=False,
              ncol=1)


# --------------------------------------------------------------------------- entry point
def _warn(msg: str):
    print(f"gpusim report: {msg}", file=sys.stderr)


def make_reports(out: Path, sc, rows: list, krows: list, fmt: str = "png") -> list:
    """Write every plot that applies to this run into ``out``; returns the written paths.

    Never raises on odd inputs: a plot that does not apply is skipped, one that fails is
    reported on stderr and skipped."""
    out = Path(out)
    fmt = fmt if fmt in ("png", "svg") else "png"
    rows = list(rows or [])
    krows = list(krows or [])
    param_names = list(getattr(sc, "param_names", None) or [])
    data = getattr(sc, "data", None) or {}
    sweep = data.get("sweep") if isinstance(data, dict) else None
    sweep_order = [k for k in (sweep if isinstance(sweep, dict) else {}) if k in param_names]
    if not rows:
        return []
    written = []
    jobs = (("line plots", lambda: line_plots(out, rows, param_names, fmt, sweep_order)),
            ("roofline", lambda: rooflines(out, rows, param_names, fmt, sweep_order)),
            ("traffic", lambda: traffic_chart(out, rows, krows, fmt)),
            ("tile heatmap", lambda: tile_heatmap(out, rows, param_names, fmt)))
    for name, job in jobs:
        try:
            written += job()
        except Exception as e:  # reporting must not fail a finished run
            _warn(f"{name} skipped: {type(e).__name__}: {e}")
    return written
