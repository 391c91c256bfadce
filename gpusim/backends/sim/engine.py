"""The timing model: CTAs on SMs, per-SM pipes, a shared L2 and a shared HBM channel.

A discrete-event simulation (SimPy): each resident CTA slot is a process (a generator that yields
how long it waits; ``run_processes`` runs them on a SimPy environment) that
walks its CTAs' step lists (``steps.py``). Compute steps hold a pipe of their SM (tensor, or the
SIMT pair vector+special-function) for the cycles ``cost.py`` gives; a busy pipe makes the next
CTA wait (FIFO). Loads are asynchronous: a pipelined loop issues the loads of iteration
``i + stages - 1`` when iteration ``i`` starts, and a CTA blocks only where it first uses a tile
that has not arrived. A load's bytes go through the L2 and the shared channels (``memory.py``:
FIFO bandwidth reservations on the HBM, the L2 and each SM's load port, latency on top).

Speed: long launches are sampled (the first waves and the last waves are simulated, the steady
middle is extrapolated from the measured rate) and long loops are coarsened (``loop_group``
iterations per step). Both are reported in the result and measured against the full simulation
in the tests; ``fidelity="full"`` turns them off. A launch's outcome is a ``LaunchStats``.
"""
from __future__ import annotations

import math
from dataclasses import replace

import simpy

from ...dsl import analysis, ir
from ...hardware import GPUConfig
from .events import CTAEvent, OpEvent
from . import compiled_steps, cost, staging
from .l2 import L2Cache
from .memory import Channel, MemoryPath
from .stats import Counters, LaunchStats, Sampling, Tally
from .steps import Issue, LoopStep, StoreStep, TensorStep, Wait, arithmetic, compile_program

HEAD_WAVES = 4        # waves simulated from the start of a sampled launch (see LaunchSim._plan)
SAMPLE_ABOVE_WAVES = 8  # launches of more waves than this are sampled


# --------------------------------------------------------------------------- one launch
class LaunchSim:
    """Simulates one launch against a GPU config and an L2 that persists across launches."""

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
        self.max_trips = max(self._trips(self._pid(c)) for c in (order[:S] + order[-S:]))
        self.group = 1 if self.fidelity == "full" else max(1, math.ceil(self.max_trips / self.loop_steps))
        return order, sampled

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
        run_processes(self, [self._worker(slot, it) for slot in range(min(self.slots, len(order)))])

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
        # ... and can go no faster than the shared channels carry those bytes
        mem = self.mem
        hbm_cycles = (skipped.dram_read_bytes + skipped.dram_write_bytes * mem.hbm_write_rate_ratio) / mem.hbm.rate
        l2_cycles = (skipped.l2_read_bytes - skipped.l2_merged_bytes
                     + skipped.l2_write_bytes * mem.l2_write_rate_ratio) / mem.l2ch.rate
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

    # ---- loops
    def _affine_loads(self, d: LoopStep, pid, start):
        """For each load of the loop: (desc, offsets at iteration 0, offset change per iteration,
        the tile axis along which consecutive iterations' tiles abut or None, leading dims)."""
        aff = []
        for ld in d.loads:
            o0 = [ir.eval_expr(e, pid, {d.var: start}) for e in ld.offsets]
            o1 = [ir.eval_expr(e, pid, {d.var: start + d.step}) for e in ld.offsets]
            delta = [b - a for a, b in zip(o0, o1)]
            lead = len(ld.offsets) - len(ld.shape)
            axis = None
            for ax in range(len(ld.shape)):
                if delta[lead + ax] == ld.shape[ax] and all(x == 0 for k, x in enumerate(delta) if k != lead + ax):
                    axis = ax
            aff.append((ld, o0, delta, axis, lead))
        return aff

    def _issue_group(self, aff, j, trips, sm, who, dist, out):
        """Issue the loads of merged step ``j`` (``loop_group`` iterations) into ``out`` (idx -> ready
        time). ``dist``: iterations between a tile's issue and the top of the iteration that needs
        it; a merged step waits out each load's latency once per ``max(dist, 1)`` iterations."""
        if not aff:
            return out
        now = self.now
        g = self.group
        lo = j * g
        k = min(g, trips - lo)
        expose = max(0.0, k / max(dist, 1) - 1.0)
        load = self.mem.load
        if k == 1:
            for ld, o0, delta, axis, lead in aff:
                out[ld.idx] = load(ld, [a + lo * b for a, b in zip(o0, delta)], now, sm, who, 1, axis, expose)
            return out
        for ld, o0, delta, axis, lead in aff:
            if axis is not None:
                out[ld.idx] = load(ld, [a + lo * b for a, b in zip(o0, delta)], now, sm, who, k, axis, expose)
            else:
                t = now
                for r in range(k):
                    t = max(t, load(ld, [a + (lo + r) * b for a, b in zip(o0, delta)], now, sm, who))
                out[ld.idx] = t + expose * self.cfg.hbm_latency_cycles
        return out

    def _through_registers(self, serial, ready: dict) -> dict:
        """``ready`` (load idx -> ready time) with each later staged tile of a one-stage loop
        requested only once the earlier ones have arrived (``staging.one_stage_serial``)."""
        first, later = serial
        t = max((ready[i] for i in first if i in ready), default=None)
        if t is None:
            return ready
        now = self.now
        for i in later:
            if i in ready:
                ready[i] = t + (ready[i] - now)
        return ready

    def _loop(self, d: LoopStep, pid, sm, sm_id, cid, who):
        start = ir.eval_expr(d.start, pid, {})
        trips = analysis.loop_trips(d, pid)
        if trips == 0:
            return
        g = self.group
        nsup = -(-trips // g)
        aff = self._affine_loads(d, pid, start)
        # Triton's pipeliner waits for all but stages-2 copies at the top of an iteration and issues
        # the copy for iteration i+stages-1 after the body: tiles that feed a dot arrive stages-2
        # iterations ahead; tiles loaded into registers are not pipelined, nor are staged tiles that
        # cp.async cannot copy (rows aligned to 2 bytes: LDG + STS, staging.copies_async)
        dist = max(0, d.stages - 2)
        tensors, cfg = self.tensors, self.cfg
        ahead_ok = [a[0].sram and dist > 0 and staging.copies_async(tensors[a[0].tensor], a[0].shape, cfg)
                    for a in aff]
        early = [a for a, ok in zip(aff, ahead_ok) if ok]
        late = [a for a, ok in zip(aff, ahead_ok) if not ok]
        ahead = -(-dist // g)
        # one stage: no cp.async; staged tiles go LDG -> registers -> STS (staging.one_stage_serial)
        serial = staging.one_stage_serial(d) if d.stages == 1 else None
        inflight = {}
        timeline, compute = self.timeline, self._compute
        for j in range(min(ahead, nsup)):
            inflight[j] = self._issue_group(early, j, trips, sm, who, dist, {})
        issue, body, spill, spill_st = self._issue_group, d.body, d.spill_bytes, d.spill_store_bytes
        for j in range(nsup):
            nxt = j + ahead
            if early and nxt < nsup and nxt not in inflight:
                inflight[nxt] = issue(early, nxt, trips, sm, who, dist, {})
            ready = inflight.pop(j, None)
            if late or ready is None:
                ready = issue(late, j, trips, sm, who, 0, ready if ready is not None else {})
                if serial:
                    ready = self._through_registers(serial, ready)
            scale = min(g, trips - j * g)
            if spill:
                t = self.mem.spill(spill * scale, self.now, sm, spill_st * scale)
                if t > self.now:
                    yield t - self.now
            for s in body:
                kind = type(s)
                if kind is Wait:
                    t = ready.get(s.load, 0.0)
                    if t > self.now:
                        yield self._wait(t, sm_id, cid)
                elif kind is StoreStep:
                    for r in range(scale):      # a merged step stores every iteration it stands for
                        self.mem.store(s.op, pid, {d.var: start + (j * g + r) * d.step}, self.now, who, sm)
                elif timeline:
                    yield self._step(s, sm, sm_id, cid, scale)
                else:
                    now = self.now
                    yield compute(s, sm, now, scale) - now
            self.progress += scale


def run_processes(sim, procs) -> None:
    """Run the CTA-slot processes on a SimPy environment: each is a generator that yields how long it
    waits and is resumed by a callback on a SimPy timeout (lighter than a ``simpy.Process``, same
    order of events); ``sim.now`` follows the environment's clock. SimPy orders simultaneous events
    FIFO: every process starts, in order, before the first timeout it schedules fires.
    Each process has one pending wake-up at a time, so it re-schedules its own (triggered) event
    instead of building a timeout per wait: the same queue entry (time, NORMAL, next id) a timeout gets."""
    env = simpy.Environment()
    schedule = env.schedule
    normal = simpy.events.NORMAL

    def driver(gen, wake):
        nxt = gen.__next__

        def resume(_event):
            sim.now = env.now
            try:
                delay = nxt()
            except StopIteration:
                return
            wake.callbacks = cbs
            schedule(wake, normal, delay)
        cbs = [resume]
        return resume

    for p in procs:
        start = env.event()
        start.callbacks.append(driver(p, start))
        start.succeed()
    env.run()
