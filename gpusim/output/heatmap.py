"""Tile-shape heatmap: ``tile_heatmap.<fmt>``, time per (BLOCK_M, BLOCK_N).

One panel per combination of the other varying fields, all on one colour scale (one colour bar: the
same colour is the same time in every panel); with more than ``MAX_PANELS`` combinations, one panel
whose every cell is the fastest over them, the winning values written under its time, so no
combination is dropped. Each cell gives the time in plain microseconds (``4,480``, never
``4.48e+03``), the fastest cell is boxed and starred, infeasible or failed cells are hatched grey
and say why (for SRAM: what the tile would need), cells never run say so.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

from .points import ABBREV, constants_line, distinct, fmt_val, is_ok, num, pval, varying
from .style import figure, null_formatter, plain_log_formatter, save, titles, wrap
from .units import fmt_us

SRAM_REASON = re.compile(r"needs ([\d.]+ \w+) of SRAM per CTA, (\S+) allows ([\d.]+ \w+)")
MAX_PANELS = 6        # 2 x 3 panels stay readable on one screen; more become one panel of the best
WON = "_won"          # a best-of cell's row: the winning values of the other fields ('stages=3')
INFEASIBLE_FC, INFEASIBLE_EC = "#d5d5d5", "#888"


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
    fig = draw_tile_heatmap(rows, param_names)
    return [] if fig is None else [save(fig, out, "tile_heatmap", fmt)]


def draw_tile_heatmap(rows, param_names):
    """The heatmap figure, or None when the rows do not sweep both BLOCK_M and BLOCK_N."""
    tiled = [r for r in rows if pval(r.get("BLOCK_M", "")) != "" and pval(r.get("BLOCK_N", "")) != ""]
    if len(distinct(tiled, "BLOCK_M")) < 2 or len(distinct(tiled, "BLOCK_N")) < 2:
        return None
    others = [n for n in dict.fromkeys(["kernel"] + varying(tiled, param_names, exclude=("BLOCK_M", "BLOCK_N")))
              if len(distinct(tiled, n)) > 1]
    combos = {}
    for r in tiled:
        combos.setdefault(tuple(pval(r.get(n, "")) for n in others), []).append(r)
    const = wrap(constants_line(tiled, param_names, skip=["BLOCK_M", "BLOCK_N"] + others), 90)
    if len(combos) > MAX_PANELS:
        shown = [(f"each cell: the fastest of the {len(combos)} combinations of {', '.join(others)} "
                  f"(the winning values under the time)", best_of(tiled, others))]
    else:
        shown = [(", ".join(f"{k}={fmt_val(v)}" for k, v in zip(others, combo)), rs) for combo, rs in combos.items()]
    n = len(shown)
    ncols = min(n, 2 if n <= 4 else 3)
    nrows = math.ceil(n / ncols)
    fig = figure(7.4 * ncols + 1.2, 6.2 * nrows + 0.8)
    fig.set_layout_engine("constrained")     # room for the title, the shared colour bar and the legend
    axes = [fig.add_subplot(nrows, ncols, i + 1) for i in range(n)]
    norm = shared_norm(tiled)
    reasons_all = []
    fastest = min((num(r.get("time_us")) for r in tiled if is_ok(r) and num(r.get("time_us"))), default=None)
    for ax, (panel, rs) in zip(axes, shown):
        reasons_all += _panel(ax, rs, panel if n > 1 or len(combos) > MAX_PANELS else const, norm, fastest)
    if norm is not None:
        cb = fig.colorbar(axes[0].images[0], ax=axes, fraction=0.04 if n > 1 else 0.05, pad=0.02)
        cb.set_label("time (µs), lower is better" + ("; one scale for every panel" if n > 1 else ""))
        cb.ax.yaxis.set_major_formatter(plain_log_formatter())
        lo, hi = norm.vmin, norm.vmax
        cb.ax.yaxis.set_minor_formatter(plain_log_formatter() if hi / lo < 10 else null_formatter())
    title = "Time per tile shape (BLOCK_M × BLOCK_N)"
    if n == 1 and len(combos) <= MAX_PANELS:
        titles(axes[0], title, axes[0].get_title(), size=12.5)
    else:
        fig.suptitle(title + (f"\n{const}" if const else ""), fontsize=12.5, fontweight="bold")
    _legend(fig, axes, reasons_all)
    return fig


def best_of(rows, others) -> list:
    """One row per (BLOCK_M, BLOCK_N): the fastest ok one over the values of ``others`` (else one
    that is not ok, to say why), with the values that won under ``WON``."""
    cells = {}
    for r in rows:
        cells.setdefault((pval(r["BLOCK_M"]), pval(r["BLOCK_N"])), []).append(r)
    out = []
    for rs in cells.values():
        ok = [r for r in rs if is_ok(r) and num(r.get("time_us"))]
        r = min(ok, key=lambda x: num(x.get("time_us"))) if ok else rs[0]
        won = " ".join(f"{ABBREV.get(n, n)}={fmt_val(pval(r.get(n, '')))}" for n in others)
        out.append({**r, WON: won} if ok else r)
    return out


def shared_norm(rows):
    """One colour scale for every panel: log when the times span more than 4x."""
    from matplotlib.colors import LogNorm, Normalize

    times = [t for t in (num(r.get("time_us")) for r in rows if is_ok(r)) if t is not None and t > 0]
    if not times:
        return None
    lo, hi = min(times), max(times)
    return LogNorm(lo, hi) if hi / lo > 4 else Normalize(lo, hi if hi > lo else lo * 1.01)


def tile_grid(rs) -> tuple:
    """(BLOCK_M values, BLOCK_N values, (m, n) -> row, time grid [m, n] with NaN where not ok, best (i, j) or None)."""
    import numpy as np

    ms, ns = distinct(rs, "BLOCK_M"), distinct(rs, "BLOCK_N")
    cell = {(pval(r["BLOCK_M"]), pval(r["BLOCK_N"])): r for r in rs}
    grid = np.full((len(ms), len(ns)), np.nan)
    for (m, nn), r in cell.items():
        t = num(r.get("time_us")) if is_ok(r) else None
        if t is not None and t > 0:
            grid[ms.index(m), ns.index(nn)] = t
    best = tuple(int(x) for x in np.unravel_index(np.nanargmin(grid), grid.shape)) if np.isfinite(grid).any() else None
    return ms, ns, cell, grid, best


def _panel(ax, rs, panel_title, norm, fastest=None) -> list:
    """Draw one panel on the shared ``norm``; returns the reasons of its infeasible cells. The cell
    at ``fastest`` (the time of the fastest cell of every panel) is starred and boxed; another
    panel's own fastest cell gets a thin box and its distance from the fastest in the title."""
    import numpy as np
    from matplotlib.patches import Rectangle

    ms, ns, cell, grid, best = tile_grid(rs)
    reasons = []
    if norm is not None:
        im = ax.imshow(np.ma.masked_invalid(grid), cmap="RdYlGn_r", norm=norm, aspect="auto")
    else:
        im = ax.imshow(np.zeros(grid.shape), cmap="Greys", vmin=0, vmax=1, aspect="auto")
    for i, m in enumerate(ms):
        for j, nn in enumerate(ns):
            r = cell.get((m, nn))
            if r is None:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fc="white", ec="#ccc"))
                ax.text(j, i, "not run", ha="center", va="center", fontsize=8, color="#999")
            elif np.isfinite(grid[i, j]):
                star = (i, j) == best and (fastest is None or grid[i, j] <= fastest)
                _time_cell(ax, i, j, grid[i, j], im.cmap(norm(grid[i, j])), star, r.get(WON))
            else:
                status = str(r.get("status", ""))
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fc=INFEASIBLE_FC, ec=INFEASIBLE_EC, hatch="///",
                                       lw=0.8))
                if status == "infeasible":
                    reasons.append(str(r.get("reason", "")))
                    label = _short_reason(str(r.get("reason", "")))
                else:
                    label = status or "missing"
                ax.text(j, i, label, ha="center", va="center", fontsize=8, color="#333",
                        bbox=dict(boxstyle="round,pad=0.15", fc="#eeeeee", ec="none", alpha=0.9))
    if best is not None:
        i, j = best
        first = fastest is None or grid[i, j] <= fastest
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="black", lw=3.0 if first else 1.4,
                               ls="-" if first else "--", zorder=5))
        won = cell[(ms[i], ns[j])].get(WON)
        behind = "" if first else f" (+{grid[i, j] / fastest - 1:.1%} on the fastest)"
        panel_title = (panel_title + " · " if panel_title else "") + \
            (f"fastest{'' if first else ' here'}: BLOCK_M={fmt_val(ms[i])}, BLOCK_N={fmt_val(ns[j])}"
             f"{' ' + won if won else ''} at {fmt_us(grid[i, j])} µs{behind}")
    ax.set_xticks(range(len(ns)))
    ax.set_xticklabels([fmt_val(v) for v in ns])
    ax.set_yticks(range(len(ms)))
    ax.set_yticklabels([fmt_val(v) for v in ms])
    ax.set_xlim(-0.5, len(ns) - 0.5)
    ax.set_ylim(len(ms) - 0.5, -0.5)
    ax.set_xlabel("BLOCK_N (key rows / C columns per tile)")
    ax.set_ylabel("BLOCK_M (query rows / C rows per CTA)")
    ax.set_title(wrap(panel_title, 80), fontsize=9.5, color="#333")
    return reasons


def _time_cell(ax, i, j, t: float, rgba, star: bool, won: str | None):
    """A cell's time in plain microseconds (starred when it is the fastest), in black or white by
    the cell colour's Rec. 601 luma, and the winning values of the other fields under it."""
    ink = "black" if 0.299 * rgba[0] + 0.587 * rgba[1] + 0.114 * rgba[2] > 0.5 else "white"
    ax.text(j, i - (0.13 if won else 0), ("★ " if star else "") + fmt_us(t), ha="center", va="center",
            fontsize=10 if star else 9, fontweight="bold" if star else "normal", color=ink)
    if won:
        ax.text(j, i + 0.2, won, ha="center", va="center", fontsize=7, color=ink)


def _legend(fig, axes, reasons):
    from matplotlib.patches import Patch

    handles = [Patch(fill=False, ec="black", lw=2.5, label="★ fastest cell")]
    if len(axes) > 1:
        handles.append(Patch(fill=False, ec="black", lw=1.2, ls="--", label="fastest cell of its panel"))
    if reasons:
        handles.append(Patch(fc=INFEASIBLE_FC, ec=INFEASIBLE_EC, hatch="///",
                             label="grey = " + _reason_caption(reasons)))
    fig.legend(handles=handles, loc="outside lower center", fontsize=8.5, frameon=False, ncol=1)
