"""The timeline events of one simulated point, split by kind for the two timeline outputs
(``chrome_trace.py``, ``gantt.py``; ``timeline.py`` writes both): CTA lanes per SM, the extrapolated
stretches of sampled launches, and memory bandwidth binned over time."""
from __future__ import annotations

from dataclasses import dataclass, field

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
