"""The timing model: CTAs on SMs, per-SM pipes, a shared L2 and a shared HBM channel.

A discrete-event simulation (SimPy): each resident CTA slot is a process (a generator that yields
how long it waits; ``run_processes`` runs them on a SimPy environment) that
walks its CTAs' step lists (``steps.py``; loops: ``pipeline.py``). Compute steps hold a pipe of their SM (tensor, or the
SIMT pair vector+special-function) for the cycles ``cost.py`` gives; a busy pipe makes the next
CTA wait (FIFO). Loads are asynchronous: a pipelined loop issues the loads of iteration
``i + stages - 1`` when iteration ``i`` starts, and a CTA blocks only where it first uses a tile
that has not arrived. A load's bytes go through the L2 and the shared channels (``memory.py``:
FIFO bandwidth reservations on the HBM, the L2 and each SM's load port, latency on top).

Speed: long launches are sampled (the first waves and the last waves are simulated, the steady
middle is extrapolated from the measured rate) and long loops are coarsened (``loop_group``
iterations per step; ``sampling.py``). Both are reported in the result and measured against the full simulation
in the tests; ``fidelity="full"`` turns them off. A launch's outcome is a ``LaunchStats``.

Two mechanisms are charged here: a dot of one CTA and the SIMT step of another overlap only by
``tensor_simt_overlap`` (``_compute``; 0.64 measured by ``gpusim calibrate --ops``, stage
``overlap``; ablation off: median / p90 |error| +1.6 / +5.3 points recorded, +3.1 / +2.0 held-out),
and CTAs start no faster than one per ``cta_dispatch_ns`` GPU-wide (0.60 ns measured with
near-empty CTAs; ablation off: +0.7 / +11.8 recorded, +0.8 / +2.0 held-out).
"""
from __future__ import annotations

import simpy

from ...dsl import analysis, ir
from ...hardware import GPUConfig
from . import compiled_steps, cost, time_limit
from .events import CTAEvent, OpEvent
from .l2 import L2Cache
from .memory import Channel, MemoryPath
from .pipeline import PipelinedLoops
from .sampling import HEAD_WAVES, SampledLaunch
from .stats import LaunchStats, Sampling, Tally
from .steps import Issue, LoopStep, StoreStep, TensorStep, Wait, compile_program


# --------------------------------------------------------------------------- one launch
class LaunchSim(SampledLaunch, PipelinedLoops):
    """Simulates one launch against a GPU config and an L2 that persists across launches (the sampling
    of long launches in ``sampling.py``, a CTA's loops in ``pipeline.py``)."""

    _owners = 0

    def __init__(self, launch: ir.Launch, cfg: GPUConfig, l2: L2Cache, addresses: dict, tensors: dict,
                 fidelity: str = "fast", timeline: bool = False, loop_steps: int = 16, view=None):
        self.launch, self.cfg, self.l2 = launch, cfg, l2
        self.occ = cost.occupancy(launch.program, cfg, launch.grid, view=view)   # view: compiler.view_of
        steps, self.loads = compile_program(launch.program, cfg)
        self.steps = compiled_steps.adjust_loops(steps, launch.program, self.occ, cfg)
        self.loops = [s for s in self.steps if isinstance(s, LoopStep)]
        self.addr = {p: addresses[launch.bindings[p]] for p in launch.bindings}
        self.tensors = {p.name: p for p in launch.program.params}
        self.cross_block = 1.0 - cfg.tensor_simt_overlap
        self.fidelity = fidelity
        self.timeline = timeline
        self.loop_steps = loop_steps
        self.grid = analysis.pad_grid(launch.grid)
        self.n_ctas = launch.num_programs
        self.slots = min(self.n_ctas, cfg.sm_count * self.occ.ctas_per_sm)
        self.events: list = []

    # ---- the launch
    def run(self) -> LaunchStats:
        order, sampled = self._plan()
        self._setup(sampled)
        self._simulate(order, sampled)
        end = max([c[0] for c in self.completions] + [self.mem.hbm.free_at, self.mem.l2ch.free_at])
        sim_work = sum(w for _, w in self.completions)
        counters = self.counters.freeze().plus(self.cta_counters.freeze())
        extra, scale = 0.0, 1.0
        if sampled:
            extra, scale, counters = self._extrapolate(order, end, sim_work, counters)
        cycles = end + extra
        sampling = Sampling(len(order), self.n_ctas, self.group, end, extra)
        return self._stats(cycles, counters, scale, sampling)

    def _setup(self, sampled: bool):
        cfg = self.cfg
        S = self.slots
        self.now = 0.0
        self.l2.new_launch()
        self.counters = Tally()        # loop traffic and compute
        self.cta_counters = Tally()    # the loads and stores outside the loops (once per CTA)
        self.mem = MemoryPath(cfg, self.l2, self.addr, self.tensors, self.launch.program.num_warps, self.counters,
                              self.timeline, min(self.occ.ctas_per_sm, -(-self.n_ctas // cfg.sm_count)))
        self.sms = self.mem.sms
        self.dispatch_cycles = cfg.cta_dispatch_ns * 1e-9 * cfg.clock_hz      # per CTA, GPU-wide
        self.dispatch = Channel(1.0 / self.dispatch_cycles) if self.dispatch_cycles else None
        self.completions = []          # (time, work)
        LaunchSim._owners += 1
        self.tail_owner = LaunchSim._owners
        self.who = 0
        self._snap_at = (S, HEAD_WAVES * S - S) if sampled else ()
        self._snap = []                # (time, progress, both tallies) at the steady window's ends
        self.progress = 0.0            # work done so far: loop iterations finished + CTAs ended

    def _simulate(self, order, sampled: bool):
        it = self._dispatch(order, HEAD_WAVES * self.slots if sampled else None)
        self.order, self.stop = order, time_limit.stop_cycles(self.cfg.clock_hz)
        run_processes(self, [self._worker(slot, it) for slot in range(min(self.slots, len(order)))], self.stop)

    def _stats(self, cycles, counters, scale, sampling) -> LaunchStats:
        n_sms = self.cfg.sm_count
        busy = tuple(sum(sm.pipe_busy[i] for sm in self.sms) * scale / (n_sms * cycles) if cycles else 0.0
                     for i in range(3))
        transfers = ()
        if self.timeline:
            transfers = (("hbm", tuple(self.mem.hbm.log)), ("l2", tuple(self.mem.l2ch.log)))
        return LaunchStats(cycles, counters, busy, self.occ, sampling, tuple(self.events), transfers)

    def _dispatch(self, order, head):
        """CTA ids in launch order; CTAs after the skipped middle touch the L2 as a new owner."""
        for i, cid in enumerate(order):
            if head is not None and i == head:
                self.who = self.tail_owner
            yield cid

    def _worker(self, slot, it):
        sm_id = slot % self.cfg.sm_count
        sm = self.sms[sm_id]
        for cid in it:
            if self.dispatch is not None:
                t = self.dispatch.transfer(1.0, self.now)
                if t > self.now:
                    yield t - self.now
            t0 = self.now
            yield from self._cta(cid, sm, sm_id)
            self.completions.append((self.now, self._work(cid)))
            self.progress += 1
            if len(self.completions) in self._snap_at:
                self._snap.append((self.now, self.progress, self.counters.freeze(), self.cta_counters.freeze()))
            if self.stop is not None and self._least_cycles() > self.stop:
                raise time_limit.stop()
            if self.timeline:
                self.events.append(CTAEvent(sm_id, slot, cid, t0, self.now))

    # ---- compute
    def _compute(self, s, sm, now, scale=1.0):
        """Reserve the pipe(s) for step ``s``; returns the finish time."""
        pf = sm.pipe_free
        c = self.counters
        block = self.cross_block      # share of a step's time the *other* kind of work is held off
        if type(s) is TensorStep:
            cyc = s.cycles * scale
            start = pf[0] if pf[0] > now else now
            pf[0] = start + cyc
            sm.pipe_busy[0] += cyc
            c.tensor_flops += s.flops * scale
            if block:
                pf[1] = (pf[1] if pf[1] > start else start) + block * cyc
            return pf[0]
        vec, sfu = s.vector_cycles * scale, s.sfu_cycles * scale
        start = now         # max(now, the busy pipes' free times), without the builtin's call
        if vec and pf[1] > start:
            start = pf[1]
        if sfu and pf[2] > start:
            start = pf[2]
        dur = sfu if sfu > vec else vec
        lat = s.min_cycles * scale
        fin = start + (lat if lat > dur else dur)
        if vec:
            pf[1] = start + vec
            sm.pipe_busy[1] += vec
        if sfu:
            pf[2] = start + sfu
            sm.pipe_busy[2] += sfu
        if block:
            pf[0] = (pf[0] if pf[0] > start else start) + block * dur
        c.vector_flops += s.flops * scale
        c.sfu_ops += s.sfu_ops * scale
        return fin

    def _cta(self, cid, sm, sm_id):
        pid = self._pid(cid)
        who = self.who
        ready = {}
        mem = self.mem
        for s in self.steps:
            kind = type(s)
            if kind is Issue:       # the per-CTA tally counts it (no yield until it is restored)
                d = s.load
                mem.counters = self.cta_counters
                ready[d.idx] = mem.load(d, [ir.eval_expr(e, pid, {}) for e in d.offsets], self.now, sm, who)
                mem.counters = self.counters
            elif kind is Wait:
                t = ready.pop(s.load, 0.0)
                if t > self.now:
                    yield self._wait(t, sm_id, cid)
            elif kind is StoreStep:
                mem.counters = self.cta_counters
                mem.store(s.op, pid, {}, self.now, who, sm)
                mem.counters = self.counters
            elif kind is LoopStep:
                yield from self._loop(s, pid, sm, sm_id, cid, who)
            else:
                yield self._step(s, sm, sm_id, cid)

    def _wait(self, t, sm_id, cid):
        """The delay that blocks the CTA until a load it needs arrives at time ``t`` (> now)."""
        if self.timeline:
            self.events.append(OpEvent("wait", sm_id, cid, self.now, t))
        return t - self.now

    def _step(self, s, sm, sm_id, cid, scale=1.0):
        """Run one compute step (``scale`` loop iterations' worth) on the SM's pipes; returns the delay."""
        now = self.now
        fin = self._compute(s, sm, now, scale)
        if self.timeline:
            self.events.append(OpEvent("tensor" if type(s) is TensorStep else "simt", sm_id, cid, now, fin))
        return fin - now


def run_processes(sim, procs, stop: float | None = None) -> None:
    """Run the CTA-slot processes on a SimPy environment: each is a generator that yields how long it
    waits and is resumed by a callback on a SimPy timeout (lighter than a ``simpy.Process``, same
    order of events); ``sim.now`` follows the environment's clock. SimPy orders simultaneous events
    FIFO: every process starts, in order, before the first timeout it schedules fires.
    Each process has one pending wake-up at a time, so it re-schedules its own (triggered) event
    instead of building a timeout per wait: the same queue entry (time, NORMAL, next id) a timeout gets.
    ``stop``: raise ``time_limit.Stopped`` at that time if a process is still running then (one
    event, scheduled after the processes start: the others keep their order)."""
    env = simpy.Environment()
    schedule = env.schedule
    normal = simpy.events.NORMAL
    running = [len(procs)]

    def driver(gen, wake):
        nxt = gen.__next__

        def resume(_event):
            sim.now = env.now
            try:
                delay = nxt()
            except StopIteration:
                running[0] -= 1
                return
            wake.callbacks = cbs
            schedule(wake, normal, delay)
        cbs = [resume]
        return resume

    for p in procs:
        start = env.event()
        start.callbacks.append(driver(p, start))
        start.succeed()
    if stop is not None:
        def halt(_event):
            if running[0]:
                raise time_limit.stop()
        env.timeout(stop).callbacks.append(halt)
    env.run()
