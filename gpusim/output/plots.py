"""Line plots of each metric against the swept axis, with the pivot table beside each.

Writes ``plot_<metric>.<fmt>`` and ``plot_<metric>.csv`` for time (µs), achieved TFLOP/s and DRAM
bytes: one line per (kernel, gpu, other varying parameters and GPU fields); colour tells kernels and
parameter combinations apart, line style tells GPUs apart. The time's 90% prediction interval is
shaded where there are at most ``MAX_BANDS`` lines (more bands overlap into one shade). The x axis
is a swept parameter or GPU field (``gpu.<field>``, labelled in its unit: ``units.py``); a field
that moves in step with it (zipped with it) is named in the x label rather than splitting the lines. Rows that are not ok are left out and counted in the subtitle. A
run that gets no line plots says why, in one line on stderr.
"""
from __future__ import annotations

import csv
from pathlib import Path

from .points import (constants_line, distinct, dram_bytes, fmt_named, fmt_val, is_number, is_ok, num, param_help, pval,
                     series_label, sort_key, sweep_axis, varying, warn)
from .style import LINESTYLES, color, figure, save, set_log_y, set_x_axis, titles, wrap

METRICS = (
    # file stem, title, y label, log y, value(row)
    ("time_us", "Time", "time (µs)", True, lambda r: num(r.get("time_us"))),
    ("tflops", "Throughput", "achieved TFLOP/s", False, lambda r: num(r.get("tflops"))),
    ("dram_bytes", "DRAM traffic", "DRAM bytes (read + write)", True, dram_bytes),
)
MARKERS = "osD^v<>ph*"
MAX_INSIDE_LEGEND = 5      # more series than this and the legend moves outside the axes, right of it
MAX_BANDS = 3              # interval bands only for this few lines: more overlap into one shade


def line_plots(out: Path, rows, param_names, fmt="png", sweep_order=()) -> list:
    """plot_<metric>.<fmt> + plot_<metric>.csv for each metric against the sweep axis."""
    why = no_line_plots(rows, param_names, sweep_order)
    if why:
        if rows:
            warn(f"no line plots: {why}")
        return []
    axis = sweep_axis(rows, param_names, sweep_order)
    ok = [r for r in rows if is_ok(r) and pval(r.get(axis, "")) != ""]
    tied = in_step(ok, axis, varying(rows, param_names, exclude=(axis,)))
    others = [n for n in varying(rows, param_names, exclude=(axis,)) if n not in tied]
    xs_all = distinct(ok, axis)
    categorical = not all(is_number(v) for v in xs_all)
    xpos = {v: (i if categorical else v) for i, v in enumerate(xs_all)}
    help_ = param_help(axis)
    xlabel = f"{axis} ({help_})" if help_ else axis
    if tied:
        xlabel += "\nin step: " + "; ".join(f"{n} = {', '.join(fmt_named(n, v) for v in tied[n])}" for n in tied)
    subtitle = "\n".join(wrap(x) for x in (constants_line(rows, param_names, skip=(axis,)),
                                           _not_shown(rows, axis)) if x)
    with_kernel = len(distinct(rows, "kernel")) > 1
    written = []
    for stem, title, ylabel, logy, value in METRICS:
        series, style = {}, {}      # label -> {x: y}; label -> (colour key, line-style key = gpu)
        bands = {}                  # label -> {x: (lo, hi)}: the time's 90% prediction interval
        for r in ok:
            y = value(r)
            if y is None or (logy and y <= 0):
                continue
            label = series_label(r, others, with_kernel)
            series.setdefault(label, {})[pval(r[axis])] = y
            lo, hi = num(r.get("time_us_lo")), num(r.get("time_us_hi"))
            if stem == "time_us" and lo is not None and hi is not None:
                bands.setdefault(label, {})[pval(r[axis])] = (lo, hi)
            style.setdefault(label, (series_label(r, [v for v in others if v != "gpu"], with_kernel),
                                     str(r.get("gpu"))))
        if not series:
            continue
        fig = figure(9, 5.4)
        ax = fig.add_subplot()
        shaded = bands if len(bands) <= MAX_BANDS else {}
        _draw_series(ax, series, style, xpos, shaded)
        set_x_axis(ax, xs_all, categorical, lambda v: fmt_named(axis, v))
        if logy:
            set_log_y(ax, "B" if stem == "dram_bytes" else None)
        else:
            ax.set_ylim(bottom=0)
        ax.grid(True, which="major", alpha=0.35)
        ax.grid(True, which="minor", alpha=0.12)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel + (" — log scale" if logy else ""))
        titles(ax, f"{title} vs {axis}", "\n".join(x for x in (subtitle, _band_note(bands, shaded)) if x))
        if len(series) <= MAX_INSIDE_LEGEND:
            ax.legend(fontsize=8.5, loc="best", framealpha=0.9)
        else:
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        written.append(save(fig, out, f"plot_{stem}", fmt))
        written.append(write_pivot(Path(out) / f"plot_{stem}.csv", axis, xs_all, series))
    return written


def _band_note(bands: dict, shaded: dict) -> str:
    if shaded:
        return "shaded: the 90% prediction interval (docs/model.md)"
    return (f"90% prediction intervals: time_us_lo, time_us_hi in results.csv (shaded for up to {MAX_BANDS} lines)"
            if bands else "")


def no_line_plots(rows, param_names, sweep_order=()) -> str:
    """Why ``rows`` get no line plots, in a few words ('' when they do)."""
    if not rows:
        return "no points"
    axis = sweep_axis(rows, param_names, sweep_order)
    if axis is None:
        only = [n for n in ("kernel", "gpu") if len(distinct(rows, n)) > 1]
        verb = "vary" if len(only) > 1 else "varies"
        return ("only one value per parameter and GPU field" + (f" (only {' and '.join(only)} {verb}: see the roofline)"
                                                              if only else ""))
    if not any(is_ok(r) and pval(r.get(axis, "")) != "" for r in rows):
        kinds = {}
        for r in rows:
            kinds[str(r.get("status") or "missing")] = kinds.get(str(r.get("status") or "missing"), 0) + 1
        return f"no point along {axis} is ok ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))})"
    return ""


def in_step(rows, axis, names) -> dict:
    """The fields among ``names`` that move in step with ``axis`` (one value per axis value, more
    than one overall: zipped with it) -> their values in axis order."""
    out = {}
    for n in names:
        if n in ("gpu", "kernel"):
            continue
        seen = {}
        for r in rows:
            v = pval(r.get(n, ""))
            if v != "":
                seen.setdefault(pval(r.get(axis, "")), set()).add(v)
        if seen and all(len(s) == 1 for s in seen.values()) and len({next(iter(s)) for s in seen.values()}) > 1:
            out[n] = [next(iter(seen[x])) for x in sorted(seen, key=sort_key)]
    return out


def _not_shown(rows, axis) -> str:
    """'not shown: 2 infeasible point(s); matmul take(s) no seq_len: not shown' (or '')."""
    notes, kinds = [], {}
    for r in rows:
        if not is_ok(r):
            k = str(r.get("status") or "missing")
            kinds[k] = kinds.get(k, 0) + 1
    if kinds:
        notes.append("not shown: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) + " point(s)")
    missing_axis = sorted({str(r.get("kernel")) for r in rows if is_ok(r) and pval(r.get(axis, "")) == ""})
    if missing_axis:
        notes.append(f"{', '.join(missing_axis)} take(s) no {axis}: not shown")
    return "; ".join(notes)


def _draw_series(ax, series: dict, style: dict, xpos: dict, bands: dict | None = None):
    colors = list(dict.fromkeys(c for c, _ in style.values()))
    dashes = list(dict.fromkeys(g for _, g in style.values()))
    for label, pts in series.items():
        xs = sorted(pts, key=sort_key)
        ci, gi = colors.index(style[label][0]), dashes.index(style[label][1])
        band = (bands or {}).get(label, {})
        bx = [x for x in xs if x in band]
        if bx:
            ax.fill_between([xpos[x] for x in bx], [band[x][0] for x in bx], [band[x][1] for x in bx],
                            color=color(ci, len(colors)), alpha=0.15, lw=0)
        ax.plot([xpos[x] for x in xs], [pts[x] for x in xs], marker=MARKERS[ci % len(MARKERS)],
                ms=5 + 1.5 * (gi % 2), mfc="white" if gi % 2 else None, lw=1.6, label=label,
                color=color(ci, len(colors)), ls=LINESTYLES[gi % len(LINESTYLES)])


def write_pivot(path: Path, axis: str, xs_all, series: dict) -> Path:
    """The plotted numbers as CSV: one row per swept value, one column per line (6 significant digits)."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow([axis] + list(series))
        for x in xs_all:
            w.writerow([fmt_val(x)] + [("%.6g" % pts[x]) if x in pts else "" for pts in series.values()])
    return path
