"""A CTA's loop: Triton's software pipeliner and the loads of merged loop steps.

Models: Triton's pipeliner (read from its TTGIR) waits at the top of an iteration for all but
``S - 2`` of the copies in flight and issues the next copy after the body, so the tiles that feed
a dot are copied ``S - 2`` iterations ahead; tiles loaded into registers are issued when the
iteration starts, and so are staged tiles cp.async cannot copy (``staging.copies_async``). At one
stage a staged tile loaded after a dot is requested only once the tiles before that dot have
arrived (``staging.one_stage_serial``), and a staged tile copied through registers waits out its
round trip once per ``staging.register_rounds`` (``register_staged``). A CTA blocks only at the
first use of a tile that has not arrived. A merged step (``loop_group`` iterations) waits out each load's latency once per
``max(S - 2, 1)`` iterations it stands for.

Measured by: 1 and 2 stages take the same time on the H200 (docs/model.md, "Pipelining and
memory-level parallelism"); ``micro/val_stream_pad`` (tiles cp.async cannot copy: 1630 and 1634
cycles per iteration at 3 and 2 stages, against 906 and 1551 when it can);
``micro/val_chain_dot_stages`` (one stage 1.3-2.1x the time of two; predicted -24% to +4% with
the one-stage order, 10-42% fast without it).

Effect: the pipelining depth is part of every loop kernel's prediction; the ablation's related
rows (docs/model.md) are "cp.async minimum width" (+0.0 / +0.0 recorded, +0.0 / +0.5 held-out
on every second point).
"""
from __future__ import annotations

from ...dsl import analysis, ir
from . import staging
from .steps import LoopStep, SimtStep, StoreStep, TensorStep, Wait


def merged_wait(k: int, ahead: int, dist: int, work: float) -> tuple:
    """(exposures, credit) of a merged step of ``k`` iterations whose loads were issued ``ahead``
    merged steps before it, for tiles a full-fidelity loop issues ``dist`` iterations ahead: the
    step's tiles are ready ``lat x (1 + exposures) + credit`` after their issue, ``lat`` a tile's
    round trip and ``work`` one iteration's compute cycles.

    At full fidelity a loop whose round trip L binds runs an iteration per ``(L + work) / (dist + 1)``
    cycles (iteration i + dist is issued when iteration i starts; iteration i computes once its
    tile is back). A merged step computes its k iterations once all their tiles are back, so it
    ends when the full loop's last iteration of it would if its tiles are ready
    ``L + (k (ahead + 1) - 1 - dist) (L + work) / (dist + 1) - (k - 1) work`` after their issue.
    Up to one iteration ahead (up to 3 stages) this is ``k / max(dist, 1)`` latencies and no
    credit, the rule before it; further ahead that rule waited less, and fast mode was up to 24%
    faster than full on long-K GEMMs of 4 stages (tests/backends/sim/test_merged_steps.py).

    The engine gives a loop's first steps, all issued when it starts, the same ``ahead``: their own
    (fewer) steps ahead put fast mode nearer full on 3-stage flash, but full is itself too fast
    there, and the held-out flash points' median |error| grew from 6.9 to 7.3%."""
    c = (k * (ahead + 1) - 1 - dist) / (dist + 1)
    return max(0.0, c), (c - (k - 1)) * work if c > 0 else 0.0


def waits_of(d: LoopStep, g: int, trips: int, dist: int) -> dict:
    """Iterations in a merged step (``g``, and the last step's) -> its ``merged_wait``, for tiles
    issued ``dist`` iterations ahead of loop ``d`` merged by ``g``."""
    work = iteration_work(d.body) if g > 1 and dist > 1 else 0.0
    return {k: merged_wait(k, -(-dist // g), dist, work) for k in {g, (trips - 1) % g + 1}}


def iteration_work(body) -> float:
    """The cycles one iteration's compute steps take on an idle SM, one after another."""
    return sum(s.cycles if type(s) is TensorStep else max(s.vector_cycles, s.sfu_cycles, s.min_cycles)
               for s in body if type(s) in (TensorStep, SimtStep))


def register_staged(d: LoopStep, late: list, waits: dict, tensors: dict, cfg) -> tuple:
    """(the rest of ``late``, its staged tiles cp.async cannot copy, their waits): those go LDG +
    STS and arrive in ``d.register_rounds`` round trips (``staging.register_rounds``), so each
    merged step waits out their latency that many times per iteration. At one stage, where every
    staged tile goes so, ``staging.one_stage_serial`` orders them instead."""
    rounds = d.register_rounds
    if rounds <= 1.0 or d.stages <= 1:
        return late, [], {}
    rest, regs = [], []
    for a in late:
        ld = a[0]
        (regs if ld.sram and not staging.copies_async(tensors[ld.tensor], ld.shape, cfg) else rest).append(a)
    return rest, regs, {k: ((e + 1.0) * rounds - 1.0, c) for k, (e, c) in waits.items()}


class PipelinedLoops:
    """The loop half of ``engine.LaunchSim``: issuing a loop's loads ahead and running its steps.
    Reads the attributes ``LaunchSim`` sets and calls its ``_compute``, ``_step`` and ``_wait``."""

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

    def _issue_group(self, aff, j, trips, sm, who, waits, out):
        """Issue the loads of merged step ``j`` (``loop_group`` iterations) into ``out`` (idx -> ready
        time). ``waits``: iterations in the step -> its ``merged_wait`` (``waits_of``)."""
        if not aff:
            return out
        now = self.now
        g = self.group
        lo = j * g
        k = min(g, trips - lo)
        expose, credit = waits[k]
        load = self.mem.load
        if k == 1:
            for ld, o0, delta, axis, lead in aff:
                out[ld.idx] = load(ld, [a + lo * b for a, b in zip(o0, delta)], now, sm, who, 1, axis, expose) + credit
            return out
        for ld, o0, delta, axis, lead in aff:
            if axis is not None:
                out[ld.idx] = load(ld, [a + lo * b for a, b in zip(o0, delta)], now, sm, who, k, axis, expose) + credit
            else:
                t = now
                for r in range(k):
                    t = max(t, load(ld, [a + (lo + r) * b for a, b in zip(o0, delta)], now, sm, who))
                out[ld.idx] = t + expose * self.cfg.hbm_latency_cycles + credit
        return out

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
        early_waits, late_waits = waits_of(d, g, trips, dist), waits_of(d, g, trips, 0)
        late, regs, reg_waits = register_staged(d, late, late_waits, tensors, cfg)
        # one stage: no cp.async; staged tiles go LDG -> registers -> STS (staging.one_stage_serial)
        serial = staging.one_stage_serial(d) if d.stages == 1 else None
        inflight = {}
        timeline, compute = self.timeline, self._compute
        for j in range(min(ahead, nsup)):
            inflight[j] = self._issue_group(early, j, trips, sm, who, early_waits, {})
        issue, body, spill, spill_st = self._issue_group, d.body, d.spill_bytes, d.spill_store_bytes
        for j in range(nsup):
            nxt = j + ahead
            if early and nxt < nsup and nxt not in inflight:
                inflight[nxt] = issue(early, nxt, trips, sm, who, early_waits, {})
            ready = inflight.pop(j, None)
            if late or regs or ready is None:
                ready = issue(late, j, trips, sm, who, late_waits, ready if ready is not None else {})
                if regs:
                    ready = issue(regs, j, trips, sm, who, reg_waits, ready)
                if serial:
                    ready = staging.through_registers(serial, ready, self.now)
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
