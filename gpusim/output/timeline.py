"""Timeline output for one simulated point: a Chrome trace (timeline.json) and a Gantt chart.

This module owns turning ``Result.timeline`` (the typed events of ``gpusim.result``, in SM clock
cycles, recorded by ``simulate(..., timeline=True)``) into

* ``timeline.json`` in Chrome Trace Event format (open it in https://ui.perfetto.dev or
  chrome://tracing): a "kernels" process with the launches, an "SMs" process with one track per
  SM (one per SM and CTA slot when several CTAs share an SM) holding CTA lifetimes with their tile
  ops nested inside, and a "memory" process with HBM and L2 bandwidth counters in GB/s. Times are
  microseconds; every slice keeps its raw cycles in ``args``;
* ``timeline.png`` (or svg): a Gantt chart of the first SMs over time with the HBM and L2
  bandwidth underneath on the same time axis.

With fast fidelity only a sample of the CTAs is simulated and the rest of each launch is
extrapolated; that stretch has no CTA events and is marked as such in both outputs.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..backends.sim.events import CTAEvent, LaunchEvent, OpEvent, TransferEvent

MAX_TRACE_EVENTS = 200_000      # CTA and tile-op slices kept in timeline.json before tracks are dropped
COUNTER_BINS = 200
GANTT_MAX_SMS = 32
GANTT_MAX_LANES = 96            # fewer SM rows when several CTAs share an SM, so each slot stays visible
OP_NAMES = {"tensor": "dot (tensor pipe)", "simt": "SIMT (elementwise / exp / reductions)", "wait": "wait on load"}
OP_COLORS = {"tensor": "#1b1b1b", "simt": "#8c8c8c", "wait": "#ffffff"}
PID_KERNELS, PID_SMS, PID_MEMORY = 1, 2, 3


@dataclass
class Parsed:
    """The timeline events of one Result, split by kind (times in cycles)."""

    clock_hz: float
    launches: list = field(default_factory=list)    # (name, t_issue, t_start, t_end)
    ctas: list = field(default_factory=list)        # (sm, slot, cta, t0, t1, launch)
    ops: list = field(default_factory=list)         # (kind, sm, cta, t0, t1, launch)
    transfers: dict = field(default_factory=lambda: {"hbm": [], "l2": []})   # kind -> [(start, end, bytes)]
    lane: dict = field(default_factory=dict)        # (sm, slot) -> lane index within the SM
    lanes: int = 1
    cta_lane: dict = field(default_factory=dict)    # (launch, sm, cta) -> lane
    extrapolated: list = field(default_factory=list)  # (launch, t0, t1, simulated, total)

    @property
    def t_end(self) -> float:
        ends = [l[3] for l in self.launches] + [c[4] for c in self.ctas]
        ends += [t[1] for ts in self.transfers.values() for t in ts]
        return max(ends) if ends else 0.0

    def us(self, cycles: float) -> float:
        return cycles / self.clock_hz * 1e6

    @property
    def sms(self) -> list:
        return sorted({c[0] for c in self.ctas})


def parse(result) -> Parsed:
    """Split ``result.timeline`` by event kind and assign each CTA slot a lane within its SM."""
    clock = result.clock_hz
    if not clock:
        from ..hardware import load_gpu

        clock = load_gpu(result.gpu).clock_hz
    p = Parsed(float(clock))
    for e in result.timeline:
        kind = type(e)
        if kind is LaunchEvent:
            p.launches.append((e.launch, e.t_issue, e.t_start, e.t_end))
        elif kind is CTAEvent:
            p.ctas.append((e.sm, e.slot, e.cta, e.t0, e.t1, e.launch))
        elif kind is OpEvent:
            p.ops.append((e.kind, e.sm, e.cta, e.t0, e.t1, e.launch))
        elif kind is TransferEvent:
            p.transfers[e.channel].append((float(e.t0), float(e.t1), float(e.nbytes)))
    slots = {}
    for sm, slot, *_ in p.ctas:
        slots.setdefault(sm, set()).add(slot)
    for sm, ss in slots.items():
        for i, s in enumerate(sorted(ss)):
            p.lane[(sm, s)] = i
    p.lanes = max((len(s) for s in slots.values()), default=1)
    for sm, slot, cta, t0, t1, launch in p.ctas:
        p.cta_lane[(launch, sm, cta)] = p.lane[(sm, slot)]
    kres = {k.launch: k for k in getattr(result, "kernels", ())}
    for name, _, t_start, t_end in p.launches:
        k = kres.get(name)
        if k is None or k.simulated_ctas >= k.total_ctas:
            continue
        last = max([c[4] for c in p.ctas if c[5] == name] + [t_start])
        if t_end - last > 1e-9 * max(1.0, t_end):
            p.extrapolated.append((name, last, t_end, k.simulated_ctas, k.total_ctas))
    return p


def bandwidth_bins(transfers, t0: float, t1: float, bins: int = COUNTER_BINS):
    """Bytes per cycle of ``transfers`` [(start, end, bytes)] averaged over ``bins`` equal bins of [t0, t1].

    Each transfer's bytes are spread evenly over its own duration. Returns (edges, bytes_per_cycle)."""
    import numpy as np

    edges = np.linspace(t0, t1, bins + 1)
    if not transfers or t1 <= t0:
        return edges, np.zeros(bins)
    a = np.asarray(transfers, dtype=float)
    s, e, b = a[:, 0], a[:, 1], a[:, 2]
    dur = e - s
    inst = dur <= 0
    rate = np.where(inst, 0.0, b / np.where(inst, 1.0, dur))

    def cumulative(x):
        """sum_i rate_i * min(t, x_i) at every edge t."""
        order = np.argsort(x)
        xs, rs = x[order], rate[order]
        c_rx = np.concatenate(([0.0], np.cumsum(rs * xs)))
        c_r = np.concatenate(([0.0], np.cumsum(rs)))
        k = np.searchsorted(xs, edges, side="right")
        return c_rx[k] + edges * (c_r[-1] - c_r[k])

    moved = cumulative(e) - cumulative(s)             # bytes moved by time t, for every edge
    per_bin = np.diff(moved)
    if inst.any():                                    # zero-length transfers land in their bin whole
        idx = np.clip(np.searchsorted(edges, s[inst], side="right") - 1, 0, bins - 1)
        np.add.at(per_bin, idx, b[inst])
    return edges, per_bin / np.diff(edges)


# --------------------------------------------------------------------------- Chrome trace
def _meta(pid, name, value, tid=None, key="name"):
    ev = {"ph": "M", "pid": pid, "name": name, "args": {key: value}}
    if tid is not None:
        ev["tid"] = tid
    return ev


def _thread_name(sm: int, lane: int, lanes: int) -> str:
    return f"SM {sm}" if lanes == 1 else f"SM {sm} slot {lane}"


def trace_events(p: Parsed, result, max_events: int = MAX_TRACE_EVENTS) -> dict:
    """The Chrome Trace Event document for a parsed timeline."""
    us = p.us

    def span(t0, t1):
        """ts/dur in µs rounded to 0.1 ns; rounding both ends keeps nested slices nested."""
        a, b = round(us(t0), 4), round(us(t1), 4)
        return {"ts": a, "dur": round(b - a, 4)}

    def cyc(x):
        return round(float(x), 2)

    per_sm = {}
    for c in p.ctas:
        per_sm[c[0]] = per_sm.get(c[0], 0) + 1
    for o in p.ops:
        per_sm[o[1]] = per_sm.get(o[1], 0) + 1
    keep, total = [], 0
    for sm in sorted(per_sm):
        if total + per_sm[sm] > max_events and keep:
            break
        keep.append(sm)
        total += per_sm[sm]
    kept = set(keep)
    note = ""
    if len(keep) < len(per_sm):
        note = (f"trace capped at {max_events} slices: only SMs {keep[0]}-{keep[-1]} of the {len(per_sm)} SMs "
                f"with CTAs are included")

    ev = [_meta(PID_KERNELS, "process_name", "kernels"), _meta(PID_KERNELS, "process_sort_index", 0, key="sort_index"),
          _meta(PID_SMS, "process_name", "SMs"), _meta(PID_SMS, "process_sort_index", 1, key="sort_index"),
          _meta(PID_MEMORY, "process_name", "memory"), _meta(PID_MEMORY, "process_sort_index", 2, key="sort_index"),
          _meta(PID_KERNELS, "thread_name", "launches", tid=0)]
    if note:
        ev.append(_meta(PID_SMS, "process_labels", note, key="labels"))
    kres = {k.launch: k for k in getattr(result, "kernels", ())}
    for name, t_issue, t_start, t_end in p.launches:
        if t_start > t_issue:
            ev.append({"ph": "X", "pid": PID_KERNELS, "tid": 0, "name": "launch overhead", "cat": "overhead",
                       **span(t_issue, t_start),
                       "args": {"launch": name, "cycles_start": cyc(t_issue), "cycles_end": cyc(t_start)}})
        args = {"cycles_issue": cyc(t_issue), "cycles_start": cyc(t_start), "cycles_end": cyc(t_end)}
        k = kres.get(name)
        if k is not None:
            args.update(grid="x".join(map(str, k.grid)), ctas_per_sm=k.ctas_per_sm, simulated_ctas=k.simulated_ctas,
                        total_ctas=k.total_ctas, dram_read_bytes=k.dram_read_bytes, dram_write_bytes=k.dram_write_bytes)
        ev.append({"ph": "X", "pid": PID_KERNELS, "tid": 0, "name": name, "cat": "launch", **span(t_start, t_end),
                   "args": args})
    for name, t0, t1, sim, tot in p.extrapolated:
        ev.append({"ph": "X", "pid": PID_KERNELS, "tid": 0, "name": "extrapolated (not simulated)", "cat": "sampling",
                   **span(t0, t1),
                   "args": {"launch": name, "simulated_ctas": sim, "total_ctas": tot, "cycles_start": cyc(t0),
                            "cycles_end": cyc(t1)}})
    lanes_of = {}
    for (sm, _), lane in p.lane.items():
        lanes_of.setdefault(sm, set()).add(lane)
    for sm in keep:
        for lane in sorted(lanes_of.get(sm, {0})):
            tid = sm * p.lanes + lane
            ev.append(_meta(PID_SMS, "thread_name", _thread_name(sm, lane, p.lanes), tid=tid))
            ev.append(_meta(PID_SMS, "thread_sort_index", tid, tid=tid, key="sort_index"))
    for sm, slot, cta, t0, t1, launch in p.ctas:
        if sm not in kept:
            continue
        ev.append({"ph": "X", "pid": PID_SMS, "tid": sm * p.lanes + p.lane[(sm, slot)], "name": f"{launch} CTA {cta}",
                   "cat": launch, **span(t0, t1),
                   "args": {"cta": cta, "launch": launch, "sm": sm, "slot": slot, "cycles_start": cyc(t0),
                            "cycles_end": cyc(t1)}})
    for kind, sm, cta, t0, t1, launch in p.ops:
        if sm not in kept:
            continue
        lane = p.cta_lane.get((launch, sm, cta), 0)
        ev.append({"ph": "X", "pid": PID_SMS, "tid": sm * p.lanes + lane, "name": OP_NAMES[kind], "cat": kind,
                   **span(t0, t1),
                   "args": {"cta": cta, "launch": launch, "cycles_start": cyc(t0), "cycles_end": cyc(t1)}})
    end = p.t_end
    for kind, label in (("hbm", "HBM bandwidth"), ("l2", "L2 bandwidth")):
        edges, rate = bandwidth_bins(p.transfers[kind], 0.0, end)
        ev.append(_meta(PID_MEMORY, "thread_name", label, tid=0))
        for t, r in zip(edges[:-1], rate):
            ev.append({"ph": "C", "pid": PID_MEMORY, "tid": 0, "name": label, "ts": round(us(t), 4),
                       "args": {"GB/s": round(float(r) * p.clock_hz / 1e9, 3)}})
        ev.append({"ph": "C", "pid": PID_MEMORY, "tid": 0, "name": label, "ts": round(us(edges[-1]), 4), "args": {"GB/s": 0.0}})
    other = {"gpu": result.gpu, "kernel": result.kernel, "params": dict(result.params), "clock_hz": p.clock_hz,
             "time_us": result.time_us, "time_unit": "ts and dur in microseconds; args cycles_* in SM clock cycles",
             "counter_bins": COUNTER_BINS, "sms_in_trace": len(keep), "sms_with_ctas": len(per_sm)}
    if note:
        other["note"] = note
    return {"traceEvents": ev, "displayTimeUnit": "ns", "otherData": other}


# --------------------------------------------------------------------------- Gantt chart
def gantt(p: Parsed, result, out: Path, fmt: str = "png") -> Path:
    """timeline.<fmt>: CTA bars per SM (coloured by launch, tile ops shaded by kind) above HBM/L2 bandwidth."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import to_rgba
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch
    from matplotlib.lines import Line2D
    from matplotlib import colormaps

    from .report import titles
    from matplotlib.collections import PolyCollection

    sms = p.sms
    shown = sms[:min(GANTT_MAX_SMS, max(8, GANTT_MAX_LANES // p.lanes))]
    row = {sm: i for i, sm in enumerate(shown)}
    n_sms_gpu = _sm_count(result) or len(sms)
    us = p.us
    end_us = us(p.t_end)
    launches = list(dict.fromkeys([l[0] for l in p.launches] + [c[5] for c in p.ctas]))
    cmap = colormaps["tab10"]
    color = {name: cmap(i % 10) for i, name in enumerate(launches)}

    fig = Figure(figsize=(13, 8.2), dpi=120)
    FigureCanvasAgg(fig)
    gs = fig.add_gridspec(2, 1, height_ratios=(3.2, 1.25), hspace=0.08)
    ax = fig.add_subplot(gs[0])
    axb = fig.add_subplot(gs[1], sharex=ax)

    lane_h = 0.84 / p.lanes

    def box(sm, lane, t0, t1, lo, hi):
        y = row[sm] - 0.42 + lane * lane_h
        x0, x1 = us(t0), us(t1)
        return ((x0, y + lo * lane_h), (x0, y + hi * lane_h), (x1, y + hi * lane_h), (x1, y + lo * lane_h))

    for i in range(1, len(shown), 2):
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

    clk = p.clock_hz
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

    params = " ".join(f"{k}={v}" for k, v in result.params.items())
    sampled = [(k.launch, k.simulated_ctas, k.total_ctas) for k in getattr(result, "kernels", ())
               if k.simulated_ctas < k.total_ctas]
    sub = params + (f"\nshowing SMs {shown[0]}-{shown[-1]} ({len(shown)} of the {len(sms)} SMs that ran CTAs; "
                    f"{result.gpu} has {n_sms_gpu})" if shown else "")
    if sampled:
        sub += "\nsampled: " + ", ".join(f"{n} {s} of {t} CTAs" for n, s, t in sampled)
    titles(ax, f"{result.kernel} on {result.gpu}: {result.time_us:.1f} µs", sub, sub_size=8.5, pad=18)
    path = Path(out) / f"timeline.{fmt}"
    fig.savefig(path, format=fmt, bbox_inches="tight")
    return path


def _sm_count(result):
    try:
        from ..hardware import load_gpu

        return load_gpu(result.gpu).sm_count
    except Exception:
        return None


# --------------------------------------------------------------------------- entry point
def write_timeline(result, out: Path, fmt: str = "png") -> list:
    """Write DIR/timeline.json (Chrome trace) and DIR/timeline.<fmt> (Gantt) for a Result simulated with
    ``timeline=True``; returns the written paths."""
    if not getattr(result, "timeline", None):
        raise ValueError(f"{result.kernel} on {result.gpu}: the result has no timeline events; "
                         f"simulate it with timeline=True")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    p = parse(result)
    doc = trace_events(p, result)
    jpath = out / "timeline.json"
    jpath.write_text(json.dumps(doc, separators=(",", ":"), default=float))
    return [jpath, gantt(p, result, out, "svg" if fmt == "svg" else "png")]
