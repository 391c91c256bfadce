"""Sampling long launches and coarsening long loops: how the timing engine stays fast.

A launch of more than ``SAMPLE_ABOVE_WAVES`` waves is sampled: the first ``HEAD_WAVES`` waves and
the last waves are simulated, the steady middle is extrapolated from the rate measured between the
end of wave 1 and the first tail dispatch, and its traffic and arithmetic are added (arithmetic
exactly, from the step list). Long loops are coarsened: ``loop_group`` iterations per step. Both
are reported in the result (``Sampling``); ``fidelity="full"`` turns them off.

This is not a mechanism of the GPU but of the simulator. Measured against the full simulation by
the tests (tests/backends/sim/test_engine.py: fast and full within a few percent on the reference
points; ``benchmarks/bench_speed.py`` times both).
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from ...dsl import analysis
from . import footprint, time_limit
from .stats import Counters
from .steps import TensorStep, arithmetic

HEAD_WAVES = 4        # waves simulated from the start of a sampled launch (see SampledLaunch._plan)
SAMPLE_ABOVE_WAVES = 8  # launches of more waves than this are sampled


class SampledLaunch:
    """The sampling half of ``engine.LaunchSim``: work per CTA, the plan of what to simulate, and the
    extrapolation of the skipped middle. Reads the attributes ``LaunchSim`` sets."""

    # ---- work per CTA (loop trips), for sampling and extrapolation
    def _pid(self, cid):
        return analysis.program_id(cid, self.grid)

    def _loop_trips(self, pid):
        """Trip count of each top-level loop for the CTA at ``pid``."""
        return [analysis.loop_trips(d, pid) for d in self.loops]

    def _trips(self, pid):
        return sum(self._loop_trips(pid))

    def _trip_totals(self):
        """Trips of each top-level loop summed over the grid; a loop whose bounds do not depend on
        the program id runs as often in every CTA."""
        out = []
        for d in self.loops:
            if analysis.uses_pid(d.start) or analysis.uses_pid(d.end):
                out.append(sum(analysis.loop_trips(d, self._pid(c)) for c in range(self.n_ctas)))
            else:
                out.append(self.n_ctas * analysis.loop_trips(d, (0, 0, 0)))
        return out

    def _work(self, cid):
        return 1 + self._trips(self._pid(cid))

    def _exact_arithmetic(self, loop_trip_totals):
        """(tensor FLOPs, vector FLOPs, SFU ops) of the whole grid, from the step list: they depend on
        the shape alone, so a sampled launch counts them exactly instead of extrapolating them."""
        const = arithmetic(self.steps)
        out = [self.n_ctas * x for x in const]
        for d, trips in zip(self.loops, loop_trip_totals):
            out = [o + trips * b for o, b in zip(out, arithmetic(d.body))]
        return out

    def _plan(self):
        """The CTAs to simulate, in order, and whether the launch is sampled; sets the loop group.

        A sampled launch simulates HEAD_WAVES waves from the start (the window between the end of
        wave 1 and the dispatch of the first tail CTA is the steady state), then the last full wave
        and the partial one."""
        n, S = self.n_ctas, self.slots
        order = list(range(n))
        sampled = self.fidelity == "fast" and n > SAMPLE_ABOVE_WAVES * S
        if sampled:
            tail_n = S + (n % S)
            order = list(range(HEAD_WAVES * S)) + list(range(n - tail_n, n))
            self.resident = footprint.resident_bytes(self.l2, self.addr, self.tensors)   # the L2 at the start
        self.max_trips = max(self._trips(self._pid(c)) for c in (order[:S] + order[-S:]))
        self.group = 1 if self.fidelity == "full" else max(1, math.ceil(self.max_trips / self.loop_steps))
        return order, sampled

    def _first_touches(self, order, skipped):
        """``skipped`` with DRAM reads no fewer than the data only the skipped CTAs touch, and DRAM
        writes their stores' bytes (``footprint.skipped_traffic``: first touches come in bursts, at
        the first CTA of each head or panel, which a window extrapolated per CTA misses or repeats)."""
        n_head = HEAD_WAVES * self.slots
        mid = np.arange(n_head, self.n_ctas - (len(order) - n_head), dtype=np.int64)
        reads, writes = footprint.skipped_traffic(self.steps, self.grid, self.tensors, np.asarray(order, dtype=np.int64),
                                                  mid, self.resident)
        return replace(skipped, dram_read_bytes=max(skipped.dram_read_bytes, float(reads)),
                       dram_write_bytes=skipped.dram_write_bytes if writes is None else float(writes))

    def _least_cycles(self) -> float:
        """The fewest cycles the launch can take, from what it has simulated so far: ``now`` (every
        simulated CTA ends no earlier), plus the least time its CTAs not yet dispatched hold the
        tensor pipes, plus, for a sampled launch, the skipped middle at the steady window's rate
        (one of the terms ``_extrapolate`` takes the largest of) or at a rate no window can exceed.
        Once the window has ended its rate is known. Before it ends only head CTAs have run, so
        its work is at most what the head has left after its start, over more than ``now - t_a``
        cycles; and its rate is at most what the tensor pipes allow over a window at least that
        long (``time_limit.work_cap``), which also holds before the window starts."""
        if not hasattr(self, "_works"):
            self._least_setup()
        head_work, skipped = self._works
        least = self.now + self._rest_cycles()
        if not self._snap_at or skipped <= 0:
            return least
        if len(self._snap) > 1:
            (t_a, p_a), (t_b, p_b) = self._snap[0][:2], self._snap[1][:2]
            return least + skipped * (t_b - t_a) / (p_b - p_a) if t_b > t_a and p_b > p_a else least
        rate, span = math.inf, 0.0
        if self._snap:
            t_a, p_a = self._snap[0][:2]
            span = self.now - t_a
            if span > 0:
                rate = (head_work - p_a) / span
        if self._cap is not None:
            rate = min(rate, self._cap[0] + self._cap[1] / max(self._cap[2], span))
        return least + skipped / rate if 0 < rate < math.inf else least

    def _least_setup(self):
        """The per-launch terms of ``_least_cycles``: the head's work, the skipped work, the tensor
        pipes' cap on the window (``time_limit.work_cap``: the window's CTAs are head CTAs, as
        the tail starts when it ends) and the least tensor cycles of any CTA."""
        trips = [self._trips(self._pid(c)) for c in self.order]
        head = trips[:HEAD_WAVES * self.slots]
        self._works = (len(head) + sum(head), self.n_ctas + sum(self._trip_totals()) - len(trips) - sum(trips))
        tensor = [sum(s.cycles for s in d.body if isinstance(s, TensorStep)) for d in self.loops]
        self._cap = time_limit.work_cap(tensor, min(head), self.cfg.sm_count, -(-self.slots // self.cfg.sm_count),
                                        self.group)
        self._cta_cycles = min(trips) * min(tensor) if tensor else 0.0

    def _rest_cycles(self) -> float:
        """The least cycles from ``now`` to the end of the CTAs not yet dispatched (at least all
        but those completed and one per slot): each holds its SM's tensor pipe for at least
        ``_cta_cycles``, each hold starting no earlier than now, on ``sm_count`` pipes."""
        waiting = len(self.order) - len(self.completions) - self.slots
        return waiting * self._cta_cycles / self.cfg.sm_count if waiting > 0 else 0.0

    def _extrapolate(self, order, end, sim_work, counters):
        """(extra cycles, counter scale, counters with the skipped middle) of a sampled launch."""
        n, S = self.n_ctas, self.slots
        head = HEAD_WAVES * S
        trip_totals = self._trip_totals()
        total_work = n + sum(trip_totals)
        # the steady rate is the work done between the end of wave 1 and the first tail dispatch,
        # counted as it happens (loop iterations when they finish, a CTA's own unit when it ends):
        # CTAs of unequal length complete in bunches long after a synchronised start (a sliding
        # window's short CTAs echo for several waves), so a rate counted from completions wanders
        (t_a, p_a, it_a, cta_a), (t_b, p_b, it_b, cta_b) = self._snap
        w_win = p_b - p_a              # >= the 2 waves of CTAs that end in the window
        rate = w_win / (t_b - t_a) if t_b > t_a else sim_work / end
        # the skipped middle moves what the window moved: its loops' bytes per loop iteration, and
        # the bytes of the loads and stores outside the loops (Q, O) per CTA; as many CTAs start
        # and end in the window (each end dispatches the next)
        n_win, n_skip = head - 2 * S, n - len(order)
        it_win, it_skip = w_win - n_win, (total_work - sim_work) - n_skip
        per_cta = n_skip / n_win
        per_it = it_skip / it_win if it_win > 0 else per_cta
        win_cta, win_it = Counters().plus(cta_b).plus(cta_a, -1.0), Counters().plus(it_b).plus(it_a, -1.0)
        skipped = Counters().plus(win_cta, per_cta).plus(win_it, per_it)
        # DRAM bytes are first touches of unique data: they follow the grid positions a CTA
        # covers, not its trip count (a causal or windowed CTA reads its own rows' K/V first
        # however long it runs), so they scale per CTA
        skipped = replace(skipped, dram_read_bytes=(win_cta.dram_read_bytes + win_it.dram_read_bytes) * per_cta,
                          dram_write_bytes=(win_cta.dram_write_bytes + win_it.dram_write_bytes) * per_cta)
        skipped = self._first_touches(order, skipped)
        # ... and can go no faster than the shared channels carry those bytes
        mem = self.mem
        hbm_cycles = (skipped.dram_read_bytes + skipped.dram_write_bytes * mem.hbm_write_rate_ratio) / mem.hbm.rate
        l2_cycles = (skipped.l2_read_bytes - skipped.l2_merged_bytes
                     + skipped.l2_write_bytes) / mem.l2ch.rate
        extra = max((total_work - sim_work) / rate, hbm_cycles, l2_cycles, (n - len(order)) * self.dispatch_cycles)
        # the skipped middle streamed its unique data through the L2: if that is more than the L2
        # holds, only lines the tail CTAs touched survive it
        touched = sum(self.tensors[p].nbytes for p in self.tensors) * (n - len(order)) / n
        if min(skipped.l2_read_bytes + skipped.l2_write_bytes, touched) > self.l2.capacity_bytes:
            self.l2.keep_only(self.tail_owner)
        total = Counters().plus(counters).plus(skipped)
        tf, vf, sf = self._exact_arithmetic(trip_totals)
        total = replace(total, tensor_flops=tf, vector_flops=vf, sfu_ops=sf)
        return extra, total_work / sim_work, total
