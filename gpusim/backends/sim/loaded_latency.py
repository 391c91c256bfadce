"""The HBM's loaded latency: under load a miss's round trip grows with the DRAM's utilisation.

Models: over the last ``hbm_queue_window_cycles`` the channel's utilisation u adds
``hbm_latency x u / (1 - u)`` to a miss's round trip, less the time the miss already waited in the
FIFO, and at most the time the misses in flight take to drain (``LoadedLatency``, used by
``memory.MemoryPath``).

Measured by: ``benchmarks/loaded_latency.py`` on the H200 (the scale: 740 cycles against the 667 of
the idle latency) and the streamed tile at 1 to 132 CTAs and 1 to 3 CTAs per SM
(``micro/val_stream_occ``, docs/history.md, round 13).

Effect (docs/model.md, ablation "loaded HBM latency" off): median / p90 |error| +0.3 / +4.8 points
on the recorded points, +0.0 / +4.4 on the held-out points.
"""
from __future__ import annotations

import heapq
from collections import deque


class LoadedLatency:
    """The HBM's loaded latency: a miss waits ``latency * u / (1 - u)`` cycles more than on an idle
    GPU, ``u`` the DRAM's utilisation, the bytes it read and wrote over the last ``window`` cycles
    over what the peak read rate moves in that time; the wait a request already has in the HBM
    channel's FIFO counts toward it, and no miss waits longer than the misses in flight take to
    drain. The 1 / (1 - u) growth of a queue's response time: measured by the streamed tile at 1 to
    132 CTAs and 1 to 3 CTAs per SM (docs/history.md, round 13).

    A merged step's bytes count as read evenly over the iterations it stands for (from its issue
    to its issue plus its exposures' latencies), not in one burst, as they are at full fidelity."""

    U_MAX = 0.95      # a numerical guard: the FIFO channel, not this term, bounds a saturated DRAM

    __slots__ = ("latency", "window", "rate", "done", "slope", "offset", "pending", "serving", "history",
                 "inflight", "inflight_bytes")

    def __init__(self, latency: float, window: float, bytes_per_cycle: float):
        self.latency, self.window, self.rate = latency, window, bytes_per_cycle
        self.done = 0.0                 # DRAM cycles fully served
        self.slope = self.offset = 0.0  # of the transfers being served: sum of rates, sum of rate x start
        self.pending: list = []         # heap of (start, end, rate): transfers not yet begun
        self.serving: list = []         # heap of (end, rate, start)
        self.history = deque([(0.0, 0.0)])     # (time, DRAM cycles served by then), the last window's
        self.inflight: list = []        # heap of (time its data is back, bytes): the misses in flight
        self.inflight_bytes = 0.0

    def miss(self, nbytes: float, back: float) -> None:
        """A miss of ``nbytes`` in flight until ``back``."""
        self.inflight_bytes += nbytes
        heapq.heappush(self.inflight, (back, nbytes))

    def add(self, nbytes: float, start: float, end: float) -> None:
        """``nbytes`` moved by the DRAM, served evenly over [start, end]."""
        dur = nbytes / self.rate
        if end <= start:
            end = start + dur
        heapq.heappush(self.pending, (start, end, dur / (end - start)))

    def extra(self, now: float, fifo_wait: float) -> float:
        """Extra round-trip cycles of a miss issued at ``now`` that already waits ``fifo_wait``."""
        p, h = self.pending, self.serving
        while p and p[0][0] <= now:
            start, end, r = heapq.heappop(p)
            self.slope += r
            self.offset += r * start
            heapq.heappush(h, (end, r, start))
        while h and h[0][0] <= now:
            end, r, start = heapq.heappop(h)
            self.slope -= r
            self.offset -= r * start
            self.done += r * (end - start)
        served = self.done + self.slope * now - self.offset
        hist = self.history
        while len(hist) > 1 and hist[1][0] <= now - self.window:
            hist.popleft()
        t0, s0 = hist[0]
        hist.append((now, served))
        u = (served - s0) / max(now - t0, self.window)
        u = min(self.U_MAX, max(0.0, u))
        f = self.inflight
        while f and f[0][0] <= now:
            self.inflight_bytes -= heapq.heappop(f)[1]
        # a closed system: no miss waits behind more bytes than are in flight
        q = min(self.latency * u / (1.0 - u), max(0.0, self.inflight_bytes) / self.rate)
        return max(0.0, q - fifo_wait)
