"""timeline.png (or svg): a Gantt chart of a point's first SMs over time (CTA bars coloured by launch,
tile ops shaded by kind) above the HBM and L2 bandwidth on the same time axis."""
from __future__ import annotations

from pathlib import Path

from .timeline_data import COUNTER_BINS, GANTT_MAX_LANES, GANTT_MAX_SMS, OP_COLORS, OP_NAMES, Parsed, bandwidth_bins


def _draw_sms(ax, axb, p: Parsed, row: dict, color: dict) -> None:
    """CTA bars, tile-op boxes, extrapolated stretches and launch markers on the SM axis."""
    from matplotlib.collections import PolyCollection
    from matplotlib.colors import to_rgba

    us = p.us
    lane_h = 0.84 / p.lanes

    def box(sm, lane, t0, t1, lo, hi):
        y = row[sm] - 0.42 + lane * lane_h
        x0, x1 = us(t0), us(t1)
        return ((x0, y + lo * lane_h), (x0, y + hi * lane_h), (x1, y + hi * lane_h), (x1, y + lo * lane_h))

    for i in range(1, len(row), 2):
        ax.axhspan(i - 0.5, i + 0.5, color="#f4f6f8", zorder=0, lw=0)
    cta_boxes = [(box(sm, p.lane[(sm, slot)], t0, t1, 0.04, 0.96), color[launch])
                 for sm, slot, cta, t0, t1, launch in p.ctas if sm in row]
    if cta_boxes:
        ax.add_collection(PolyCollection([b for b, _ in cta_boxes], facecolors=[to_rgba(c, 0.5) for _, c in cta_boxes],
                                         edgecolors=[to_rgba(c, 1.0) for _, c in cta_boxes], linewidths=0.4),
                          autolim=False)
    op_boxes = [(box(sm, p.cta_lane.get((launch, sm, cta), 0), t0, t1, 0.3, 0.7), OP_COLORS[kind])
                for kind, sm, cta, t0, t1, launch in p.ops if sm in row]
    if op_boxes:
        ax.add_collection(PolyCollection([b for b, _ in op_boxes], facecolors=[c for _, c in op_boxes],
                                         edgecolors="none", alpha=0.92), autolim=False)
    for name, t0, t1, *_ in p.extrapolated:
        for a in (ax, axb):
            a.axvspan(us(t0), us(t1), facecolor="#f2f2f2", edgecolor="#b0b0b0", hatch="//", lw=0, zorder=0)
    for name, t_issue, t_start, t_end in p.launches:
        for a in (ax, axb):
            a.axvspan(us(t_issue), us(t_start), facecolor="#fdf2d0", lw=0, zorder=0)
            a.axvline(us(t_start), color="#555", lw=0.7, ls=":", zorder=1)
        ax.annotate(name, (us(t_start), 1.0), xycoords=("data", "axes fraction"), xytext=(3, 3),
                    textcoords="offset points", fontsize=8.5, color=color.get(name, "black"), fontweight="bold",
                    ha="left", va="bottom")


def _sm_axis(ax, p: Parsed, shown: list, color: dict, launches: list) -> None:
    """The SM axis's limits, ticks and legend."""
    from matplotlib.colors import to_rgba
    from matplotlib.patches import Patch

    end_us = p.us(p.t_end)
    ax.set_ylim(len(shown) - 0.5, -0.5)
    step = 1 if len(shown) <= 32 else 2
    ax.set_yticks(range(0, len(shown), step))
    ax.set_yticklabels([f"SM {shown[i]}" for i in range(0, len(shown), step)], fontsize=7.5)
    ax.tick_params(axis="x", labelbottom=False)
    ax.set_xlim(0, end_us * 1.005 if end_us > 0 else 1)
    ax.set_ylabel("SM" + (f" ({p.lanes} CTA slots per row)" if p.lanes > 1 else ""))
    handles = [Patch(facecolor=to_rgba(color[n], 0.5), edgecolor=color[n], label=f"CTA of {n}") for n in launches]
    handles += [Patch(facecolor=OP_COLORS[k], edgecolor="#555" if k == "wait" else "none", label=OP_NAMES[k])
                for k in ("tensor", "simt", "wait")]
    if any(t_start > t_issue for _, t_issue, t_start, _ in p.launches):
        handles.append(Patch(facecolor="#fdf2d0", label="launch overhead"))
    if p.extrapolated:
        handles.append(Patch(facecolor="#f2f2f2", edgecolor="#b0b0b0", hatch="//",
                             label="not simulated (fast fidelity): time\nextrapolated from the sampled CTAs"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize=8)


def _bandwidth_axis(axb, p: Parsed, result) -> None:
    """HBM and L2 bandwidth over time, with the HBM peak."""
    from matplotlib.lines import Line2D

    us, clk = p.us, p.clock_hz
    for kind, label, col in (("hbm", "HBM", "#c0392b"), ("l2", "L2", "#2e86c1")):
        edges, rate = bandwidth_bins(p.transfers[kind], 0.0, p.t_end)
        gbps = rate * clk / 1e9
        axb.stairs(gbps, [us(e) for e in edges], color=col, lw=1.4 if kind == "hbm" else 1.0,
                   label=f"{label} (mean over {COUNTER_BINS} bins)", fill=kind == "hbm", alpha=0.85 if kind == "l2" else 0.35)
    peak = getattr(result, "hbm_bandwidth_bytes_per_s", None)
    bhandles, blabels = axb.get_legend_handles_labels()
    if peak:
        axb.axhline(peak / 1e9, color="#c0392b", ls="--", lw=1.2)
        bhandles.append(Line2D([], [], color="#c0392b", ls="--", lw=1.2))
        blabels.append(f"HBM peak {peak / 1e12:.2f} TB/s")
    axb.set_ylim(bottom=0)
    axb.set_ylabel("bandwidth (GB/s)")
    axb.set_xlabel("time (µs)")
    axb.grid(True, alpha=0.3)
    axb.legend(bhandles, blabels, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize=8)


def _subtitle(result, shown: list, sms: list) -> str:
    """The chart's second line: the parameters, the SMs shown and the sampled launches."""
    params = " ".join(f"{k}={v}" for k, v in result.params.items())
    sampled = [(k.launch, k.simulated_ctas, k.total_ctas) for k in getattr(result, "kernels", ())
               if k.simulated_ctas < k.total_ctas]
    n_sms_gpu = _sm_count(result) or len(sms)
    sub = params + (f"\nshowing SMs {shown[0]}-{shown[-1]} ({len(shown)} of the {len(sms)} SMs that ran CTAs; "
                    f"{result.gpu} has {n_sms_gpu})" if shown else "")
    if sampled:
        sub += "\nsampled: " + ", ".join(f"{n} {s} of {t} CTAs" for n, s, t in sampled)
    return sub


def gantt(p: Parsed, result, out: Path, fmt: str = "png") -> Path:
    """timeline.<fmt>: CTA bars per SM (coloured by launch, tile ops shaded by kind) above HBM/L2 bandwidth."""
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from .style import titles

    sms = p.sms
    shown = sms[:min(GANTT_MAX_SMS, max(8, GANTT_MAX_LANES // p.lanes))]
    row = {sm: i for i, sm in enumerate(shown)}
    launches = list(dict.fromkeys([l[0] for l in p.launches] + [c[5] for c in p.ctas]))
    cmap = colormaps["tab10"]
    color = {name: cmap(i % 10) for i, name in enumerate(launches)}

    fig = Figure(figsize=(13, 8.2), dpi=120)
    FigureCanvasAgg(fig)
    gs = fig.add_gridspec(2, 1, height_ratios=(3.2, 1.25), hspace=0.08)
    ax = fig.add_subplot(gs[0])
    axb = fig.add_subplot(gs[1], sharex=ax)
    _draw_sms(ax, axb, p, row, color)
    _sm_axis(ax, p, shown, color, launches)
    _bandwidth_axis(axb, p, result)
    titles(ax, f"{result.kernel} on {result.gpu}: {result.time_us:.1f} µs", _subtitle(result, shown, sms),
           sub_size=8.5, pad=18)
    path = Path(out) / f"timeline.{fmt}"
    fig.savefig(path, format=fmt, bbox_inches="tight")
    return path


def _sm_count(result):
    try:
        from ..hardware import load_gpu

        return load_gpu(result.gpu).sm_count
    except Exception:
        return None
