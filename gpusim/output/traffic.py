"""Naive vs flash attention traffic: ``traffic.<fmt>``, bytes across each memory boundary per launch.

For one representative point of each attention kernel (the largest sequence length both ran at the
same shape, fastest configuration there) it draws two bars per launch from kernels.csv: HBM<->L2
(DRAM read + write) and L2->SM, with the per-kernel totals and the HBM ratio in the subtitle.
"""
from __future__ import annotations

import math
from pathlib import Path

from .points import ABBREV, SHORT, dram_bytes, fmt_bytes, fmt_val, is_ok, num, pval, sort_key
from .style import HBM_COLOR, L2_COLOR, figure, plain_log_formatter, save, titles, wrap

ATTENTION = ("attention_naive", "attention_flash")
SHARED_ATTN = ("gpu", "batch", "heads", "head_dim", "dtype")
BAR_W = 0.38          # two bars side by side fill 76% of a launch's slot
GROUP_GAP = 0.7       # extra space between the naive and the flash launches, in slots
EDGE_ROOM = 0.25      # extra slot width beside a lone launch at either end: its totals box is ~1.3 slots wide


def _attn_pick(rows) -> dict:
    """kernel -> row index of the representative point: the largest common seq_len, same shape, fastest config."""
    cand = {k: [i for i, r in enumerate(rows) if is_ok(r) and r.get("kernel") == k and pval(r.get("seq_len", "")) != ""]
            for k in ATTENTION}
    cand = {k: v for k, v in cand.items() if v}
    if not cand:
        return {}

    def key(i):
        return tuple(str(pval(rows[i].get(n, ""))) for n in SHARED_ATTN)

    def fastest(idx):
        return min(idx, key=lambda i: (num(rows[i].get("time_us")) or math.inf, i))

    if len(cand) == 2:
        common = []
        for i in cand["attention_flash"]:
            for j in cand["attention_naive"]:
                if key(i) == key(j) and pval(rows[i]["seq_len"]) == pval(rows[j]["seq_len"]):
                    common.append((pval(rows[i]["seq_len"]), -min(i, j), key(i)))
        if common:
            n, _, k = max(common, key=lambda c: (sort_key(c[0]), c[1]))
            return {kern: fastest([i for i in idx if key(i) == k and pval(rows[i]["seq_len"]) == n])
                    for kern, idx in cand.items()}
    out = {}
    for kern, idx in cand.items():
        n = max((pval(rows[i]["seq_len"]) for i in idx), key=sort_key)
        at_n = [i for i in idx if pval(rows[i]["seq_len"]) == n]
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
            if pval(kr.get("point", "")) != pick[kern]:
                continue
            hbm, l2 = dram_bytes(kr), num(kr.get("l2_read_bytes"))
            if hbm is None or l2 is None:
                continue
            groups.append((kern, str(kr.get("launch", "?")), hbm, l2))
    return pick, groups


def traffic_chart(out: Path, rows, krows, fmt="png") -> list:
    """traffic.<fmt>: bytes across HBM<->L2 and L2->SM per launch for one naive and one flash point."""
    fig = draw_traffic(rows, krows)
    return [] if fig is None else [save(fig, out, "traffic", fmt)]


def draw_traffic(rows, krows):
    """The traffic figure, or None when no attention point has per-launch bytes."""
    pick, groups = traffic_groups(rows, krows)
    if not groups:
        return None
    xs, x = [], 0.0
    for i, g in enumerate(groups):
        if i and g[0] != groups[i - 1][0]:
            x += GROUP_GAP
        xs.append(x)
        x += 1.0
    fig = figure(max(6.5, 1.35 * len(groups) + 3.5), 5.8)
    ax = fig.add_subplot()
    _bars(ax, xs, groups)
    totals = {}
    for kern in dict.fromkeys(g[0] for g in groups):
        sel = [i for i, g in enumerate(groups) if g[0] == kern]
        totals[kern] = (sum(groups[i][2] for i in sel), sum(groups[i][3] for i in sel))
        _kernel_captions(ax, kern, rows[pick[kern]], (xs[sel[0]] + xs[sel[-1]]) / 2, len(sel), totals[kern])
    r0 = rows[next(iter(pick.values()))]
    shape = ", ".join(f"{n}={fmt_val(pval(r0.get(n)))}" for n in ("seq_len", "batch", "heads", "head_dim", "dtype")
                      if pval(r0.get(n, "")) != "")
    title = f"{' vs '.join(SHORT[k] for k in totals)} attention: bytes across each memory boundary, per launch"
    sub = f"{r0.get('gpu')}, {shape}"
    if len(totals) == 2:
        (nh, _), (fh, _) = totals["attention_naive"], totals["attention_flash"]
        if fh > 0:
            sub += f" — flash moves {nh / fh:.0f}× fewer HBM bytes than naive"
    titles(ax, title, wrap(sub))
    ax.legend(fontsize=8.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return fig


def _bars(ax, xs, groups):
    """Two labelled bars per launch; a log y axis when the bytes span more than 100x."""
    vals = [v for g in groups for v in g[2:] if v > 0]
    logy = bool(vals) and max(vals) / min(vals) > 100
    peak = max(max(g[2], g[3]) for g in groups)
    unit, scale = ("GB", 1e9) if peak >= 0.5e9 else ("MB", 1e6)
    bars_h = ax.bar([x - BAR_W / 2 for x in xs], [g[2] / scale for g in groups], BAR_W, color=HBM_COLOR,
                    label="HBM ↔ L2 (DRAM read + write)")
    bars_l = ax.bar([x + BAR_W / 2 for x in xs], [g[3] / scale for g in groups], BAR_W, color=L2_COLOR,
                    label="L2 → SM (bytes the SMs load through L2)")
    for bars, gi in ((bars_h, 2), (bars_l, 3)):
        for b, g in zip(bars, groups):
            ax.annotate(fmt_bytes(g[gi]), (b.get_x() + b.get_width() / 2, b.get_height()), xytext=(0, 2),
                        textcoords="offset points", ha="center", va="bottom", fontsize=7.5,
                        rotation=90 if len(groups) > 6 else 0)
    if logy:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(plain_log_formatter())
        ax.set_ylim(min(vals) / scale / 3, peak / scale * 30)
    else:
        ax.set_ylim(0, peak / scale * 1.32)
    ax.set_xticks(xs)
    ax.set_xticklabels([g[1] for g in groups])
    few = 0.6 * (len(groups) < 3)
    # a kernel with a single launch at either end gets room for its totals box, which is wider than one slot
    lone_first = len(groups) > 1 and groups[0][0] != groups[1][0]
    lone_last = len(groups) > 1 and groups[-1][0] != groups[-2][0]
    ax.set_xlim(xs[0] - 0.5 - max(few, EDGE_ROOM * lone_first), xs[-1] + 0.5 + max(few, EDGE_ROOM * lone_last))
    ax.set_ylabel(f"bytes moved per launch ({unit})" + (" — log scale" if logy else ""))
    ax.grid(True, axis="y", alpha=0.3)


def _kernel_captions(ax, kern, r, mid, launches, totals):
    """The kernel's name and tile config under its launches; its totals in a box at the top."""
    cfg = " ".join(f"{ABBREV.get(n, n)}={fmt_val(pval(r.get(n)))}" for n in ("BLOCK_M", "BLOCK_N", "num_stages")
                   if pval(r.get(n, "")) != "")
    ax.annotate(f"{kern} ({launches} launch{'es' if launches > 1 else ''}{', ' + cfg if cfg else ''})",
                (mid, 0), xycoords=("data", "axes fraction"), xytext=(0, -30), textcoords="offset points",
                ha="center", va="top", fontsize=9, fontweight="bold")
    ax.annotate(f"total: HBM↔L2 {fmt_bytes(totals[0])}\nL2→SM {fmt_bytes(totals[1])}", (mid, 1),
                xycoords=("data", "axes fraction"), xytext=(0, -6), textcoords="offset points", ha="center",
                va="top", fontsize=8.5, bbox=dict(boxstyle="round,pad=0.3", fc="white", ec="#999"))
