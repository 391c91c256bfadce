"""The SimPy timing model: CTAs on SMs, per-SM pipes, a shared L2 and a shared HBM channel.

Each resident CTA is a SimPy process that walks its program's step list. Compute steps hold a
pipe of their SM (tensor, or the SIMT pair vector+special-function) for the cycles ``cost.py``
gives; a busy pipe makes the next CTA wait (FIFO). Loads are asynchronous: a pipelined loop
issues the loads of iteration ``i + stages - 1`` when iteration ``i`` starts, and a CTA blocks
only where it first uses a tile that has not arrived. A load's bytes go through the L2 (tags-only
LRU in ``l2.py``); misses also cross the shared HBM channel. Bandwidth is modelled by reserving
time on FIFO channels (HBM, L2, each SM's load port), latency is added on top.

Speed: long launches are sampled (the first waves and the last waves are simulated, the steady
middle is extrapolated from the measured rate) and long loops are coarsened (``loop_group``
iterations per step). Both are reported in the result and measured against the full simulation
in the tests; ``fidelity="full"`` turns them off.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import simpy

from ...dsl import ir
from ...hardware import GPUConfig
from . import cost
from .l2 import L2Cache

TENSOR, SIMT = 0, 1


# --------------------------------------------------------------------------- compiled step lists
@dataclass
class LoadDesc:
    idx: int
    tensor: str
    offsets: tuple
    shape: tuple
    sram: bool


@dataclass
class LoopDesc:
    start: ir.Expr
    end: ir.Expr
    step: int
    stages: int
    var: int
    loads: list
    body: list


def _compile(ops, shared: set, loads: list):
    """Turn ops into steps: ('simt', vec, sfu, tag) ('tensor', cycles, flops, tag) ('wait', idx)
    ('issue', idx) ('store', desc) ('loop', LoopDesc). Costs are filled in later per config."""
    steps = []
    pending = {}        # value id -> load idx not yet waited for
    alias = {}

    def waits_for(vals):
        out = []
        for v in vals:
            if isinstance(v, ir.Value):
                vid = alias.get(v.id, v.id)
                if vid in pending:
                    out.append(("wait", pending.pop(vid)))
        return out

    for op in ops:
        if isinstance(op, ir.Load):
            d = LoadDesc(len(loads), op.tensor.name, op.offsets, op.out.shape, op.out.id in shared)
            loads.append(d)
            pending[op.out.id] = d.idx
            steps.append(("issue", d.idx))
            continue
        if isinstance(op, (ir.Trans, ir.ExpandDims)):
            alias[op.out.id] = alias.get(op.a.id, op.a.id)
            continue
        if isinstance(op, ir.Loop):
            first = len(loads)
            body = [s for s in _compile(op.body, shared, loads) if s[0] != "issue"]
            steps.append(("loop", LoopDesc(op.start, op.end, op.step, max(1, op.stages), op.var,
                                           list(range(first, len(loads))), body)))
            continue
        operands = [getattr(op, f) for f in op.__dataclass_fields__ if f != "out"]
        steps.extend(waits_for(operands))
        if isinstance(op, ir.Store):
            steps.append(("store", op))
        else:
            steps.append(("op", op))
    return steps


def _cost_steps(steps, cfg: GPUConfig, num_warps: int):
    """Merge consecutive compute ops into pipe steps with cycle costs."""
    out = []
    simt = None
    for s in steps:
        if s[0] == "op":
            c = cost.op_cost(s[1], cfg, num_warps)
            fl = cost.vector_flops(s[1])
            if c.tensor_cycles:
                if simt:
                    out.append(simt)
                    simt = None
                out.append(("tensor", c.tensor_cycles, c.tensor_flops, "dot"))
            elif c.simt_cycles or c.sfu_cycles:
                if simt is None:
                    simt = ["simt", 0.0, 0.0, 0.0, 0.0]
                simt[1] += c.simt_cycles
                simt[2] += c.sfu_cycles
                simt[3] += fl
                simt[4] += c.sfu_ops
            continue
        if simt:
            out.append(tuple(simt))
            simt = None
        if s[0] == "loop":
            d = s[1]
            out.append(("loop", LoopDesc(d.start, d.end, d.step, d.stages, d.var, d.loads,
                                         _cost_steps(d.body, cfg, num_warps))))
        else:
            out.append(s)
    if simt:
        out.append(tuple(simt))
    return [tuple(x) if isinstance(x, list) else x for x in out]


def compile_program(program: ir.Program, cfg: GPUConfig) -> tuple:
    shared = cost._feeds_dot(program)
    loads: list = []
    raw = _compile(program.body, shared, loads)
    return _cost_steps(raw, cfg, program.num_warps), loads


# --------------------------------------------------------------------------- shared channels
class Channel:
    """A FIFO bandwidth server: a transfer of ``b`` bytes holds it for b / rate cycles."""

    __slots__ = ("rate", "free_at", "busy", "log")

    def __init__(self, bytes_per_cycle: float, log: bool = False):
        self.rate = bytes_per_cycle
        self.free_at = 0.0
        self.busy = 0.0
        self.log = [] if log else None

    def transfer(self, nbytes: float, now: float) -> float:
        start = self.free_at if self.free_at > now else now
        dur = nbytes / self.rate
        self.free_at = start + dur
        self.busy += dur
        if self.log is not None and nbytes:
            self.log.append((start, self.free_at, nbytes))
        return self.free_at


class SM:
    __slots__ = ("pipe_free", "pipe_busy", "port")

    def __init__(self, port_rate: float):
        self.pipe_free = [0.0, 0.0, 0.0]      # tensor, vector, sfu
        self.pipe_busy = [0.0, 0.0, 0.0]
        self.port = Channel(port_rate)


@dataclass
class Counters:
    dram_read_bytes: float = 0.0
    dram_write_bytes: float = 0.0
    l2_read_bytes: float = 0.0
    l2_hit_bytes: float = 0.0
    l2_write_bytes: float = 0.0
    sram_bytes: float = 0.0
    tensor_flops: float = 0.0
    vector_flops: float = 0.0
    sfu_ops: float = 0.0

    def add(self, o: "Counters", scale: float = 1.0):
        for k in self.__dataclass_fields__:
            setattr(self, k, getattr(self, k) + scale * getattr(o, k))


# --------------------------------------------------------------------------- one launch
class LaunchSim:
    """Simulates one launch against a GPU config and an L2 that persists across launches."""

    _owners = 0

    def __init__(self, launch: ir.Launch, cfg: GPUConfig, l2: L2Cache, addresses: dict, tensors: dict,
                 fidelity: str = "fast", timeline: bool = False, loop_steps: int = 16):
        self.launch, self.cfg, self.l2 = launch, cfg, l2
        self.occ = cost.occupancy(launch.program, cfg)
        self.steps, self.loads = compile_program(launch.program, cfg)
        self.addr = {p: addresses[launch.bindings[p]] for p in launch.bindings}
        self.tensors = {p.name: p for p in launch.program.params}
        self.cross_block = 1.0 - cfg.tensor_simt_overlap
        self.fidelity = fidelity
        self.timeline = timeline
        self.loop_steps = loop_steps
        self.grid = tuple(launch.grid) + (1,) * (3 - len(launch.grid))
        self.n_ctas = launch.num_programs
        self.slots = min(self.n_ctas, cfg.sm_count * self.occ.ctas_per_sm)
        self.events: list = []

    # ---- work per CTA (loop trips), for sampling and extrapolation
    def _pid(self, cid):
        gx, gy, _ = self.grid
        return (cid % gx, (cid // gx) % gy, cid // (gx * gy))

    def _loop_trips(self, pid):
        """Trip count of each top-level loop for the CTA at ``pid``."""
        out = []
        for s in self.steps:
            if s[0] == "loop":
                d = s[1]
                a, b = ir.eval_expr(d.start, pid, {}), ir.eval_expr(d.end, pid, {})
                out.append(max(0, -(-(b - a) // d.step)))
        return out

    def _trips(self, pid):
        return sum(self._loop_trips(pid))

    def _exact_arithmetic(self, loop_trip_totals):
        """(tensor FLOPs, vector FLOPs, SFU ops) of the whole grid, from the step list: they depend on
        the shape alone, so a sampled launch counts them exactly instead of extrapolating them."""
        def flops(steps):
            t = v = f = 0.0
            for st in steps:
                if st[0] == "tensor":
                    t += st[2]
                elif st[0] == "simt":
                    v += st[3]
                    f += st[4]
            return t, v, f
        const = flops([st for st in self.steps if st[0] != "loop"])
        out = [self.n_ctas * x for x in const]
        loops = [st[1] for st in self.steps if st[0] == "loop"]
        for d, trips in zip(loops, loop_trip_totals):
            body = flops(d.body)
            out = [o + trips * b for o, b in zip(out, body)]
        return out

    def _work(self, cid):
        return 1 + self._trips(self._pid(cid))

    def run(self):
        cfg = self.cfg
        clk = cfg.clock_hz
        n, S = self.n_ctas, self.slots
        order = list(range(n))
        # sample: 4 waves from the start (the window between the end of wave 1 and the dispatch of
        # the first tail CTA is the steady state), then the last full wave and the partial one
        sampled = self.fidelity == "fast" and n > 8 * S
        head = 4 * S
        if sampled:
            tail_n = S + (n % S)
            order = list(range(head)) + list(range(n - tail_n, n))
        self.max_trips = max(self._trips(self._pid(c)) for c in (order[:S] + order[-S:]))
        self.group = 1 if self.fidelity == "full" else max(1, math.ceil(self.max_trips / self.loop_steps))

        env = simpy.Environment()
        self.env = env
        self.l2.new_launch()
        self.hbm = Channel(cfg.hbm_read_bandwidth_bytes_per_s / clk, log=self.timeline)
        self.hbm_write_rate_ratio = cfg.hbm_read_bandwidth_bytes_per_s / cfg.hbm_mixed_write_bandwidth_bytes_per_s
        self.l2ch = Channel(cfg.l2_bandwidth_bytes_per_s / clk, log=self.timeline)
        self.sms = [SM(cfg.sm_load_bytes_per_clk) for _ in range(cfg.sm_count)]
        self.dispatch_cycles = cfg.cta_dispatch_ns * 1e-9 * clk      # per CTA, GPU-wide
        self.dispatch = Channel(1.0 / self.dispatch_cycles) if self.dispatch_cycles else None
        self.counters = Counters()
        self.completions = []          # (time, work)
        LaunchSim._owners += 1
        self.tail_owner = LaunchSim._owners
        self.who = 0
        self._snap_at = (S, head - S) if sampled else ()
        self._snap = []
        it = self._dispatch(order, head if sampled else None)
        n_workers = min(S, len(order))
        for slot in range(n_workers):
            env.process(self._worker(slot, it))
        env.run()
        end = max([c[0] for c in self.completions] + [self.hbm.free_at, self.l2ch.free_at])
        sim_work = sum(w for _, w in self.completions)
        total_work = sim_work
        extra = 0.0
        if sampled:
            trip_totals = None
            for c in range(n):
                t = self._loop_trips(self._pid(c))
                trip_totals = t if trip_totals is None else [a + b for a, b in zip(trip_totals, t)]
            total_work = n + sum(trip_totals)
            done = sorted(self.completions)
            t_a, t_b = done[S - 1][0], done[head - S - 1][0]
            w_win = sum(w for _, w in done[S:head - S])
            rate = w_win / (t_b - t_a) if t_b > t_a else sim_work / end
            self.counters_scale = total_work / sim_work
            # the skipped middle moves what the steady window moved per unit of work
            c = Counters()
            c.add(self._snap[1])
            c.add(self._snap[0], -1.0)
            skipped = Counters()
            skipped.add(c, (total_work - sim_work) / w_win)
            # ... and can go no faster than the shared channels carry those bytes
            hbm_cycles = (skipped.dram_read_bytes + skipped.dram_write_bytes * self.hbm_write_rate_ratio) / self.hbm.rate
            l2_cycles = (skipped.l2_read_bytes + skipped.l2_write_bytes) / self.l2ch.rate
            extra = max((total_work - sim_work) / rate, hbm_cycles, l2_cycles,
                        (n - len(order)) * self.dispatch_cycles)
            # the skipped middle streamed its unique data through the L2: if that is more than the L2
            # holds, only lines the tail CTAs touched survive it
            touched = sum(self.tensors[p].nbytes for p in self.tensors) * (n - len(order)) / n
            if min(skipped.l2_read_bytes + skipped.l2_write_bytes, touched) > self.l2.capacity_bytes:
                self.l2.keep_only(self.tail_owner)
        else:
            self.counters_scale = 1.0
        total = Counters()
        total.add(self.counters)
        if sampled:
            total.add(skipped)
            total.tensor_flops, total.vector_flops, total.sfu_ops = self._exact_arithmetic(trip_totals)
        self.total_counters = total
        self.cycles = end + extra
        self.sampling = {"simulated_ctas": len(order), "total_ctas": n, "loop_group": self.group,
                         "extrapolated_cycles": extra, "simulated_cycles": end}
        return self

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
                t = self.dispatch.transfer(1.0, self.env.now)
                if t > self.env.now:
                    yield self.env.timeout(t - self.env.now)
            t0 = self.env.now
            yield from self._cta(cid, sm, sm_id)
            self.completions.append((self.env.now, self._work(cid)))
            if len(self.completions) in self._snap_at:
                snap = Counters()
                snap.add(self.counters)
                self._snap.append(snap)
            if self.timeline:
                self.events.append(("cta", sm_id, slot, cid, t0, self.env.now))

    # ---- memory
    def _load(self, d: LoadDesc, offs, now, sm, who, nrep=1, rep_axis=None):
        """Issue one (possibly merged) tile load; returns its ready time."""
        shape = d.shape
        if nrep > 1:
            shape = list(shape)
            shape[rep_axis] *= nrep
        t = self.tensors[d.tensor]
        r = cost.tile_bytes_in_bounds(t, offs, tuple(shape))
        if r is None:
            return now
        rows, row_bytes, first, pitch = r
        nbytes = rows * row_bytes
        hits, misses, hit_ready = self.l2.access(self.addr[d.tensor] + first, rows, pitch, row_bytes, now, who)
        lines = hits + misses
        miss_bytes = nbytes * misses / lines if lines else 0.0
        c = self.counters
        c.l2_read_bytes += nbytes
        c.l2_hit_bytes += nbytes - miss_bytes
        c.dram_read_bytes += miss_bytes
        if d.sram:
            c.sram_bytes += nbytes
        cfg = self.cfg
        ready = max(self.l2ch.transfer(nbytes, now), sm.port.transfer(nbytes, now)) + cfg.l2_latency_cycles
        if hit_ready > ready:
            ready = hit_ready
        if misses:
            fill = self.hbm.transfer(miss_bytes, now) + cfg.hbm_latency_cycles
            self.l2.fill_done(fill)
            ready = max(ready, fill)
        return ready

    def _store(self, op: ir.Store, pid, lv, now, who):
        offs = [ir.eval_expr(e, pid, lv) for e in op.offsets]
        t = self.tensors[op.tensor.name]
        r = cost.tile_bytes_in_bounds(t, offs, op.value.shape)
        if r is None:
            return
        rows, row_bytes, first, pitch = r
        nbytes = rows * row_bytes
        # write-allocate in L2 (a later kernel's read can hit), write through to HBM
        self.l2.access(self.addr[op.tensor.name] + first, rows, pitch, row_bytes, now, who)
        self.l2.fill_done(now)
        self.l2ch.transfer(nbytes, now)
        self.hbm.transfer(nbytes * self.hbm_write_rate_ratio, now)
        self.counters.dram_write_bytes += nbytes
        self.counters.l2_write_bytes += nbytes

    # ---- compute
    def _compute(self, s, sm, now, scale=1.0):
        """Reserve the pipe(s) for step ``s``; returns the finish time."""
        pf = sm.pipe_free
        c = self.counters
        block = self.cross_block      # share of a step's time the *other* kind of work is held off
        if s[0] == "tensor":
            cyc = s[1] * scale
            start = pf[0] if pf[0] > now else now
            pf[0] = start + cyc
            sm.pipe_busy[0] += cyc
            c.tensor_flops += s[2] * scale
            if block:
                pf[1] = max(pf[1], start) + block * cyc
            return pf[0]
        vec, sfu = s[1] * scale, s[2] * scale
        start = max(now, pf[1] if vec else now, pf[2] if sfu else now)
        dur = max(vec, sfu)
        fin = start + dur
        if vec:
            pf[1] = start + vec
            sm.pipe_busy[1] += vec
        if sfu:
            pf[2] = start + sfu
            sm.pipe_busy[2] += sfu
        if block:
            pf[0] = max(pf[0], start) + block * dur
        c.vector_flops += s[3] * scale
        c.sfu_ops += s[4] * scale
        return fin

    def _cta(self, cid, sm, sm_id):
        env = self.env
        pid = self._pid(cid)
        who = self.who
        ready = {}
        for s in self.steps:
            kind = s[0]
            if kind == "issue":
                d = self.loads[s[1]]
                ready[d.idx] = self._load(d, [ir.eval_expr(e, pid, {}) for e in d.offsets], env.now, sm, who)
            elif kind == "wait":
                yield from self._wait(ready.pop(s[1], 0.0), sm_id, cid)
            elif kind == "store":
                self._store(s[1], pid, {}, env.now, who)
            elif kind == "loop":
                yield from self._loop(s[1], pid, sm, sm_id, cid, who)
            else:
                yield from self._step(s, sm, sm_id, cid)

    def _wait(self, t, sm_id, cid):
        """Block the CTA until a load it needs has arrived at time ``t``."""
        env = self.env
        if t > env.now:
            if self.timeline:
                self.events.append(("wait", sm_id, cid, env.now, t))
            yield env.timeout(t - env.now)

    def _step(self, s, sm, sm_id, cid, scale=1.0):
        """Run one compute step (``scale`` loop iterations' worth) on the SM's pipes."""
        env = self.env
        fin = self._compute(s, sm, env.now, scale)
        if self.timeline:
            self.events.append((s[0] if s[0] == "tensor" else "simt", sm_id, cid, env.now, fin))
        yield env.timeout(fin - env.now)

    def _loop(self, d: LoopDesc, pid, sm, sm_id, cid, who):
        env = self.env
        start, end = ir.eval_expr(d.start, pid, {}), ir.eval_expr(d.end, pid, {})
        trips = max(0, -(-(end - start) // d.step))
        if trips == 0:
            return
        g = self.group
        nsup = -(-trips // g)
        # affine offsets: offs(iteration j) = base + j * delta
        aff = []
        for li in d.loads:
            ld = self.loads[li]
            o0 = [ir.eval_expr(e, pid, {d.var: start}) for e in ld.offsets]
            o1 = [ir.eval_expr(e, pid, {d.var: start + d.step}) for e in ld.offsets]
            delta = [b - a for a, b in zip(o0, o1)]
            lead = len(ld.offsets) - len(ld.shape)
            axis = None
            for ax in range(len(ld.shape)):
                if delta[lead + ax] == ld.shape[ax] and all(x == 0 for k, x in enumerate(delta) if k != lead + ax):
                    axis = ax
            aff.append((ld, o0, delta, axis, lead))

        def issue(j):
            lo = j * g
            k = min(g, trips - lo)
            out = {}
            for ld, o0, delta, axis, lead in aff:
                offs = [a + lo * b for a, b in zip(o0, delta)]
                if axis is not None or k == 1:
                    out[ld.idx] = self._load(ld, offs, env.now, sm, who, k, axis)
                else:
                    t = env.now
                    for r in range(k):
                        t = max(t, self._load(ld, [a + (lo + r) * b for a, b in zip(o0, delta)], env.now, sm, who))
                    out[ld.idx] = t
            return out

        inflight = {}
        ahead = d.stages - 1
        for j in range(min(ahead, nsup)):
            inflight[j] = issue(j)
        for j in range(nsup):
            nxt = j + ahead
            if nxt < nsup and nxt not in inflight:
                inflight[nxt] = issue(nxt)
            ready = inflight.pop(j)
            scale = min(g, trips - j * g)
            for s in d.body:
                kind = s[0]
                if kind == "wait":
                    yield from self._wait(ready.get(s[1], 0.0), sm_id, cid)
                elif kind == "store":
                    self._store(s[1], pid, {d.var: start + j * g * d.step}, env.now, who)
                else:
                    yield from self._step(s, sm, sm_id, cid, scale)
