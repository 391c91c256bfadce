"""The look shared by every gpusim figure: canvas, titles, colours, axis scales and tick labels, saving.

Figures are drawn with matplotlib's object API on the Agg canvas (no pyplot state, safe in worker
processes). The plot modules (plots.py, roofline.py, traffic.py, heatmap.py, timeline.py) build
their axes with these helpers so titles, fonts and log axes read the same everywhere.
"""
from __future__ import annotations

import math
import textwrap
from pathlib import Path

from .points import fmt_val, is_pow2

HBM_COLOR, L2_COLOR = "#c0392b", "#2e86c1"
LINESTYLES = ("-", "--", ":", "-.")      # one per GPU, so the same kernel on two GPUs stays visible
DPI = 120                                # 9 x 5.4 in -> 1080 x 648 px: sharp on screen, small on disk


def figure(w: float, h: float):
    """A ``w`` x ``h`` inch figure on its own Agg canvas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def save(fig, out: Path, stem: str, fmt: str) -> Path:
    """Write ``fig`` to ``out/stem.fmt`` cropped to its drawn content; returns the path."""
    path = Path(out) / f"{stem}.{fmt}"
    fig.savefig(path, format=fmt, bbox_inches="tight")
    return path


def titles(ax, title: str, subtitle: str = "", size: float = 13, sub_size: float = 9, pad: float = 6):
    """A bold title above a smaller grey subtitle of any number of lines, both centred on ``ax``."""
    lines = subtitle.count("\n") + 1 if subtitle else 0
    ax.set_title(subtitle, fontsize=sub_size, color="#444", pad=pad)
    ax.annotate(title, (0.5, 1.0), xycoords="axes fraction", xytext=(0, pad + lines * sub_size * 1.25 + 3),
                textcoords="offset points", ha="center", va="bottom", fontsize=size, fontweight="bold")


def wrap(s: str, width: int = 110) -> str:
    """``s`` broken into lines of at most ``width`` characters ('' stays '')."""
    return "\n".join(textwrap.wrap(s, width)) if s else ""


def color(i: int, n: int):
    """The ``i``-th of ``n`` categorical colours (tab10, or tab20 beyond ten)."""
    from matplotlib import colormaps

    return colormaps["tab10"](i % 10) if n <= 10 else colormaps["tab20"](i % 20)


def plain_log_formatter():
    """Tick labels 0.5, 2, 300, 20,000 instead of matplotlib's 10^x (or 2e+04) on a log axis."""
    from matplotlib.ticker import FuncFormatter

    from .units import plain

    return FuncFormatter(lambda v, _: plain(v))


def null_formatter():
    from matplotlib.ticker import NullFormatter

    return NullFormatter()


def eng_log_axis(axis, unit):
    """Major ticks as 10 TFLOP/s, 1 GB/s ...; no minor labels."""
    from matplotlib.ticker import EngFormatter

    axis.set_major_formatter(EngFormatter(unit=unit, places=0))
    axis.set_minor_formatter(null_formatter())


def set_x_axis(ax, xs_all, categorical: bool, fmt=fmt_val):
    """Ticks at the swept values: log2 for powers of two ($2^{20}$ once they get long, unless ``fmt``
    gives them a unit), log10 for wide ranges, one tick per category otherwise; at most ~12
    labelled ticks, each labelled by ``fmt``."""
    from matplotlib.ticker import NullLocator

    if categorical:
        ax.set_xticks(range(len(xs_all)))
        ax.set_xticklabels([fmt(v) for v in xs_all])
        return
    pow2 = len(xs_all) > 1 and all(is_pow2(v) for v in xs_all)
    big = max(xs_all) >= 100000
    if pow2:
        ax.set_xscale("log", base=2)
    elif all(v > 0 for v in xs_all) and max(xs_all) / min(xs_all) >= 16:
        ax.set_xscale("log")
    ticks = xs_all if len(xs_all) <= 12 else xs_all[::math.ceil(len(xs_all) / 12)]
    ax.set_xticks(ticks)
    if pow2 and big and fmt is fmt_val:
        ax.set_xticklabels([f"$2^{{{int(v).bit_length() - 1}}}$" for v in ticks])
    else:
        ax.set_xticklabels([fmt(v) for v in ticks])
    ax.xaxis.set_minor_locator(NullLocator())


def set_log_y(ax, engineering_unit=None):
    """A log y axis with plain (or engineering-unit) labels; minor ticks labelled when the range is narrow,
    with as many decimals as it takes for neighbouring labels to differ (34.0 MB, 34.5 MB, not 34 MB twice)."""
    from matplotlib.ticker import LogLocator

    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    if hi / lo < 30:
        ax.yaxis.set_minor_locator(LogLocator(base=10, subs=(1.5, 2, 3, 5, 7) if hi / lo < 10 else (2, 3, 5)))
        ticks = [v for v in list(ax.yaxis.get_majorticklocs()) + list(ax.yaxis.get_minorticklocs()) if lo <= v <= hi]
        ax.yaxis.set_minor_formatter(distinct_formatter(ticks, engineering_unit))
        ax.yaxis.set_major_formatter(distinct_formatter(ticks, engineering_unit))
    else:
        ax.yaxis.set_major_formatter(distinct_formatter([], engineering_unit))
        ax.yaxis.set_minor_formatter(null_formatter())


def distinct_formatter(ticks, unit=None, max_places: int = 3):
    """Tick labels in engineering notation with ``unit`` (1 MB, 34.5 MB) and the fewest decimals
    (0..max_places) that keep ``ticks`` apart; plain numbers (0.5, 300) without a unit."""
    from matplotlib.ticker import EngFormatter, FuncFormatter

    if not unit:
        return FuncFormatter(lambda v, _: f"{v:g}")          # six significant digits: distinct enough

    def make(places):
        return EngFormatter(unit=unit, places=places)

    for places in range(max_places + 1):
        f = make(places)
        labels = [f(v) for v in sorted(set(ticks))]
        if len(set(labels)) == len(labels):
            return f
    return make(max_places)


def drop_overlapping_labels(fig, texts, offsets, ax=None, points=()) -> int:
    """Move each annotation through candidate ``offsets`` until it overlaps no earlier one and no marker
    at ``points`` (data coordinates of ``ax``); drop it if none fits. Returns how many were dropped."""
    from matplotlib.text import Text
    from matplotlib.transforms import Bbox

    if not texts:
        return 0
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    placed, dropped = [], 0
    r = 4 * fig.dpi / 72                 # a marker's radius: about 4 points
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
