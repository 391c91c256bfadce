"""Tile-shape heatmap: ``tile_heatmap.<fmt>``, time per (BLOCK_M, BLOCK_N).

One panel per combination of the other varying fields (at most ``MAX_PANELS``); each cell gives the
time, the fastest cell is boxed and starred, infeasible or failed cells are hatched grey and say why
(for SRAM: what the tile would need), cells never run say so.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

from .points import constants_line, distinct, fmt_val, is_ok, num, pval, varying
from .style import figure, null_formatter, plain_log_formatter, save, titles, wrap

SRAM_REASON = re.compile(r"needs ([\d.]+ \w+) of SRAM per CTA, (\S+) allows ([\d.]+ \w+)")
MAX_PANELS = 4        # 2 x 2 panels stay readable on one screen
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
    others = [n for n in ["kernel"] + varying(tiled, param_names, exclude=("BLOCK_M", "BLOCK_N"))
              if len(distinct(tiled, n)) > 1]
    combos = {}
    for r in tiled:
        combos.setdefault(tuple(pval(r.get(n, "")) for n in others), []).append(r)
    shown = list(combos.items())[:MAX_PANELS]
    n = len(shown)
    ncols = 1 if n == 1 else 2
    nrows = math.ceil(n / ncols)
    fig = figure(8.2 * ncols, 6.6 * nrows)
    if n > 1:
        fig.set_layout_engine("constrained")     # room for the figure title above the panels' own titles
    axes = [fig.add_subplot(nrows, ncols, i + 1) for i in range(n)]
    reasons_all = []
    const = wrap(constants_line(tiled, param_names, skip=["BLOCK_M", "BLOCK_N"] + others), 90 if n == 1 else 150)
    for ax, (combo, rs) in zip(axes, shown):
        panel = ", ".join(f"{k}={fmt_val(v)}" for k, v in zip(others, combo))
        reasons_all += _panel(fig, ax, rs, panel if n > 1 else const)
    title = "Time per tile shape (BLOCK_M × BLOCK_N)"
    if n == 1:
        titles(axes[0], title, axes[0].get_title(), size=12.5)
    else:
        fig.suptitle(title + (f"\n{const}" if const else ""), fontsize=12.5, fontweight="bold")
    if len(combos) > MAX_PANELS:
        fig.text(0.5, 0.0, f"showing the first {MAX_PANELS} of {len(combos)} combinations of "
                           f"{', '.join(others)}", ha="center", va="top", fontsize=9, color="#a00")
    _legend(axes[-1], reasons_all)
    return fig


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


def _panel(fig, ax, rs, panel_title) -> list:
    """Draw one panel; returns the reasons of its infeasible cells."""
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
        cb.ax.yaxis.set_major_formatter(plain_log_formatter())
        cb.ax.yaxis.set_minor_formatter(plain_log_formatter() if hi / lo < 10 else null_formatter())
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
                lum = 0.299 * rgba[0] + 0.587 * rgba[1] + 0.114 * rgba[2]       # Rec. 601 luma: pick black/white text
                is_best = (i, j) == best
                ax.text(j, i, ("★ " if is_best else "") + f"{grid[i, j]:.3g}", ha="center", va="center",
                        fontsize=10 if is_best else 9, fontweight="bold" if is_best else "normal",
                        color="black" if lum > 0.5 else "white")
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
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, ec="black", lw=3.0, zorder=5))
        panel_title = (panel_title + "\n" if panel_title else "") + \
            f"fastest: BLOCK_M={fmt_val(ms[i])}, BLOCK_N={fmt_val(ns[j])} at {grid[i, j]:.3g} µs"
    ax.set_xticks(range(len(ns)))
    ax.set_xticklabels([fmt_val(v) for v in ns])
    ax.set_yticks(range(len(ms)))
    ax.set_yticklabels([fmt_val(v) for v in ms])
    ax.set_xlim(-0.5, len(ns) - 0.5)
    ax.set_ylim(len(ms) - 0.5, -0.5)
    ax.set_xlabel("BLOCK_N (key rows / C columns per tile)")
    ax.set_ylabel("BLOCK_M (query rows / C rows per CTA)")
    ax.set_title(panel_title, fontsize=9.5, color="#333")
    return reasons


def _legend(ax, reasons):
    from matplotlib.patches import Patch

    handles = [Patch(fill=False, ec="black", lw=2.5, label="★ fastest cell")]
    if reasons:
        handles.append(Patch(fc=INFEASIBLE_FC, ec=INFEASIBLE_EC, hatch="///", label="grey = " + _reason_caption(reasons)))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.12), fontsize=8.5, frameon=False,
              ncol=1)
