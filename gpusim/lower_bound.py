"""A cheap lower bound of a point's simulated time, for pruning a tuning search (``tune.py``).

``lower_bound(workload, cfg)`` reads the program's costed step list (``steps.compile_program``:
pure cost functions, no compiler, no simulation) and returns a ``Bound`` whose ``time_us`` the
simulated time of the same point cannot go below, or the reason the point is infeasible for
reasons the compiler's view cannot change (shared memory per CTA, warps, HBM capacity, Triton's
tile rules). Each launch is bounded at the maximum clock by the larger of

- ``pipes``: its SMs' tensor, vector and special-function pipe cycles (the tensor steps at the
  tile efficiency of their shape, without the compiler's duplication, which only adds), each
  SM taking its share of the grid, with the cross-pipe blocking of ``tensor_simt_overlap``;
- ``latency``: the loop iterations each CTA runs one after another, each waiting for tiles issued
  ``num_stages - 2`` iterations ahead at no less than the L2's round trip, with at most as many
  CTAs per SM as shared memory, warps and the CTA limit allow (registers ignored: only fewer);
- ``port``: the bytes its loads move through each SM's load port (tiles wholly inside their
  tensors only; otherwise this term is left out);
- ``dram``: the compulsory DRAM bytes (``physics.compulsory_bytes``) at the HBM's rate;

and then by the power limit (``_power_floor``): the energy of its tensor FLOPs, staged bytes and
compulsory DRAM bytes in one repetition of the timing loop the clock is set by cannot exceed the
limit, whichever of ``under_load.run_launch``'s three ways sets its cycles. The launch and sync
overheads are added as the simulation adds them. ``tests/test_tune.py`` checks the bound against
the simulation on a sample of configs of every shipped kernel family.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import physics, precheck
from .backends.sim import cost, power
from .backends.sim.coalescer import coalesced_fraction
from .backends.sim.pipeline import iteration_work
from .backends.sim.access import vector_width
from .backends.sim.staging import copies_async, staging_cost
from .backends.sim.steps import LoopStep, SimtStep, TensorStep, compile_program
from .compiler import ESTIMATE, CompilerView
from .dsl import analysis, ir

# The simulation's sampling (fidelity fast) extrapolates a long launch's middle from a measured
# rate, and merges loop iterations into steps; both can land a little under a full simulation's
# bound. The bound is lowered by this share so that it stays below the sampled time too.
SAMPLING_SLACK = 0.03


@dataclass(frozen=True)
class Bound:
    """``time_us``: no simulation of the point is faster; ``limit``: the term that set it (pipes,
    latency, port, dram or power); ``infeasible``: why the point cannot run (then time_us is 0)."""

    time_us: float
    limit: str = ""
    infeasible: str = ""


def lower_bound(workload: ir.Workload, cfg) -> Bound:
    """A lower bound of ``simulate_workload(workload, cfg)``'s time (see the module docstring)."""
    why = precheck.infeasible_reason(workload, cfg)
    if why:
        return Bound(0.0, infeasible=why)
    first_reader = _first_readers(workload)
    total_s, limits = 0.0, {}
    for i, launch in enumerate(workload.launches):
        try:    # registers ignored (one per thread): only the view-independent limits can raise
            occ = cost.occupancy(launch.program, cfg, launch.grid, view=CompilerView(ESTIMATE, 1))
        except cost.InfeasibleError as e:
            return Bound(0.0, infeasible=str(e))
        terms, energy = _launch_terms(launch, cfg, occ.ctas_per_sm, workload, first_reader, i)
        sm_s = max(terms["pipes"], terms["port"])
        s_lb = max(terms.values())
        t = max(s_lb, _power_floor(cfg, s_lb, sm_s, energy))
        name = "power" if t > s_lb * (1 + 1e-9) else max(terms, key=terms.get)
        limits[name] = limits.get(name, 0.0) + t
        total_s += t + cfg.launch_overhead_us * 1e-6
    us = (total_s * (1 - SAMPLING_SLACK)) * 1e6 + cfg.sync_overhead_us
    return Bound(us, max(limits, key=limits.get) if limits else "")


def _first_readers(workload) -> dict:
    """Workload input -> index of the first launch that loads it (it is read from DRAM there)."""
    out = {}
    for i, launch in enumerate(workload.launches):
        for op in ir.walk(launch.program.body):
            if isinstance(op, ir.Load):
                name = launch.bindings.get(op.tensor.name, op.tensor.name)
                out.setdefault(name, i)
    return out


def _trip_counts(steps, launch) -> list:
    """Total trips of each top-level loop over the grid (as the sampler counts them)."""
    grid = analysis.pad_grid(launch.grid)
    n = launch.num_programs
    out = []
    for d in (s for s in steps if isinstance(s, LoopStep)):
        if analysis.uses_pid(d.start) or analysis.uses_pid(d.end):
            out.append(sum(analysis.loop_trips(d, analysis.program_id(c, grid)) for c in range(n)))
        else:
            out.append(n * analysis.loop_trips(d, (0, 0, 0)))
    return out


def _launch_terms(launch, cfg, ctas_max: int, workload, first_reader: dict, index: int) -> tuple:
    """({term: seconds at the maximum clock}, (SM joules, memory joules, pipe-busy seconds per SM)
    lower bounds) of a launch."""
    steps, _ = compile_program(launch.program, cfg)
    n, sms, clk = launch.num_programs, cfg.sm_count, cfg.clock_hz
    loops = [s for s in steps if isinstance(s, LoopStep)]
    trips = _trip_counts(steps, launch)
    tensor = vector = sfu = simt = flops = 0.0
    for body, k in [(steps, n)] + [(d.body, t) for d, t in zip(loops, trips)]:
        for s in body:
            if type(s) is TensorStep:
                tensor += s.cycles * k
                flops += s.flops * k
            elif type(s) is SimtStep:
                vector += s.vector_cycles * k
                sfu += s.sfu_cycles * k
                simt += max(s.vector_cycles, s.sfu_cycles) * k
    block = 1.0 - cfg.tensor_simt_overlap
    pipes = max(tensor + block * simt, vector + block * tensor, sfu) / sms
    lb = _load_bytes(launch, loops, trips, n, cfg)
    terms = {"pipes": pipes / clk, "latency": _latency(launch, loops, trips, cfg, n, ctas_max, lb.per_iteration) / clk,
             "port": lb.port / cfg.sm_load_bytes_per_clk / sms / clk}
    reads, writes = _compulsory(launch, workload, first_reader, index)
    terms["dram"] = (reads + writes * cfg.hbm_write_cost) / cfg.hbm_read_bandwidth_bytes_per_s
    terms["l2"] = (lb.l2_cost + writes) / cfg.l2_bandwidth_bytes_per_s
    e = cfg.activity_energy_j or {}
    e_sm = (e.get("tensor_flop", 0.0) * flops + e.get("sram_byte", 0.0) * lb.staged
            + e.get("vector_cycle", 0.0) * vector + e.get("sfu_cycle", 0.0) * sfu)
    e_mem = e.get("dram_byte", 0.0) * (reads + writes) + e.get("l2_byte", 0.0) * (lb.l2_bytes + writes)
    return terms, (e_sm, e_mem, (tensor + vector + sfu) / sms / clk)


@dataclass
class _Bytes:
    """What a launch's loads move, at the least (all 0 when it cannot be told cheaply): bytes
    staged into shared memory, port bytes (staged tiles at their staging cost), bytes and cost the
    L2 slices see after the most merging the request coalescer allows, and each loop's port bytes
    per iteration (by loop variable)."""

    staged: float = 0.0
    port: float = 0.0
    l2_bytes: float = 0.0
    l2_cost: float = 0.0
    per_iteration: dict = field(default_factory=dict)


def _load_bytes(launch, loops, trips, n, cfg) -> _Bytes:
    """The launch's ``_Bytes``, counted when every tile lies wholly inside its tensor (tiles divide
    their tensor's dims and the grid's first and last programs' tiles, at their loops' first and
    last iterations, are inside); else all 0: no bound from bytes."""
    tensors = {p.name: p for p in launch.program.params}
    grid = analysis.pad_grid(launch.grid)
    ends = (analysis.program_id(0, grid), analysis.program_id(n - 1, grid))
    out, shared = _Bytes(), analysis.feeds_dot(launch.program)
    for op in launch.program.body:
        items = [(op, None, n)] if isinstance(op, ir.Load) else []
        if isinstance(op, ir.Loop):
            t = next((t for d, t in zip(loops, trips) if d.var == op.var), None)
            if t is None or any(isinstance(o, ir.Loop) for o in op.body):
                return _Bytes()
            items = [(o, op, t) for o in op.body if isinstance(o, ir.Load)]
        for ld, loop, k in items:
            t = tensors[ld.tensor.name]
            if not _whole_tiles(t, ld, loop, ends):
                return _Bytes()
            tile = ld.out.numel * ir.DTYPE_BYTES[t.dtype]
            sram = ld.out.id in shared
            port = tile * (staging_cost(t, ld.out.shape, vector_width(t, ld.out.shape), cfg) if sram else 1.0)
            least = _least_coalesced(cfg.l2_coalesced_fraction, tile)
            out.port += port * k
            out.l2_bytes += tile * k * least
            out.l2_cost += port * k * least
            out.staged += tile * k if sram else 0.0
            if loop is not None:
                out.per_iteration[loop.var] = out.per_iteration.get(loop.var, 0.0) + port
    return out


def _least_coalesced(table: dict, tile_bytes: int) -> float:
    """The least share of a tile's bytes the L2 slices read however many requests for it merge
    (``coalescer.coalesced_fraction`` at its table's points; linear between them, the end values
    past them): a run of n requests costs n x f(n) of the bytes, f non-increasing."""
    if not table:
        return 1.0
    ns = {n for by_tile in table.values() for curve in by_tile.values() for n in curve} | {1}
    return min(1.0, min(coalesced_fraction(table, c, tile_bytes, n) for c in table for n in ns))


def _whole_tiles(t, ld, loop, pids) -> bool:
    shape = ld.out.shape
    dims = t.shape[len(t.shape) - len(shape):]
    if any(d % s for d, s in zip(dims, shape)):
        return False
    for pid in pids:
        vals = [{}] if loop is None else [{loop.var: v} for v in _loop_ends(loop, pid)]
        for lv in vals:
            offs = [ir.eval_expr(e, pid, lv) for e in ld.offsets]
            r = analysis.tile_bytes_in_bounds(t, offs, shape)
            if r is None or r[0] * r[1] != ld.out.numel * ir.DTYPE_BYTES[t.dtype]:
                return False
    return True


def _loop_ends(loop, pid) -> list:
    start = ir.eval_expr(loop.start, pid, {})
    trips = analysis.loop_trips(loop, pid)
    return [start, start + max(0, trips - 1) * loop.step] if trips else []


def _latency(launch, loops, trips: list, cfg, n: int, ctas_max: int, port_per_iteration: dict) -> float:
    """SM cycles of an average SM's CTAs waiting on their loops' round trips (see the module
    docstring): per iteration at least (the tiles' round trip + the iteration's compute) / (ahead + 1),
    the round trip being the L2's latency after the SM's port has taken the iteration's tiles, and
    ``ctas_max`` CTAs of an SM overlapping."""
    if not n:
        return 0.0
    tensors = {p.name: p for p in launch.program.params}
    total = 0.0
    for d, t in zip(loops, trips):
        if not d.loads or not t:
            continue
        ahead = max(0, d.stages - 2)
        dist = min(ahead if (ld.sram and copies_async(tensors[ld.tensor], ld.shape, cfg)) else 0 for ld in d.loads)
        trip = cfg.l2_latency_cycles + port_per_iteration.get(d.var, 0.0) / cfg.sm_load_bytes_per_clk
        total += t * (trip + iteration_work(d.body)) / (dist + 1)
    resident = max(1, min(ctas_max, -(-n // cfg.sm_count)))
    return total / n * max(1.0, n / cfg.sm_count / resident)


def _compulsory(launch, workload, first_reader: dict, index: int) -> tuple:
    """(bytes read, bytes written) of the launch that every run moves through DRAM: the workload
    inputs it is the first to load, the workload outputs it stores."""
    loaded, stored = set(), set()
    for op in ir.walk(launch.program.body):
        name = launch.bindings.get(op.tensor.name, op.tensor.name) if isinstance(op, (ir.Load, ir.Store)) else None
        if isinstance(op, ir.Load) and first_reader.get(name) == index:
            loaded.add(name)
        elif isinstance(op, ir.Store):
            stored.add(name)
    t = workload.tensors
    reads = sum(t[x].nbytes for x in workload.inputs if x in loaded and x in t)
    writes = sum(t[x].nbytes for x in workload.outputs if x in stored and x in t)
    return reads, writes


def _power_floor(cfg, s_lb: float, sm_s: float, energy: tuple) -> float:
    """The least time a launch can take once the power limit lowers its clock (0 without a power
    model). ``s_lb``: its bound at the maximum clock; ``sm_s``: its SM cycles' bound there, in
    seconds; ``energy``: (SM joules, memory joules, pipe-busy seconds summed over pipes per SM)."""
    e_sm, e_mem, busy_s = energy
    if not cfg.power_limit_w or not cfg.activity_energy_j or e_sm <= 0:
        return 0.0
    head = cfg.power_limit_w - cfg.idle_power_w
    if head <= 0:
        return 0.0
    flush_j, flush_s = power.flush_energy(cfg)
    e0, period0 = e_mem + flush_j, flush_s + cfg.launch_overhead_us * 1e-6
    k, lo_r = cfg.dvfs_energy_exponent, power.MIN_CLOCK_RATIO

    def h(r):   # the launch's time at clock ratio r when the loop's mean power meets the limit
        return (e_sm * r ** k + e0) / head - period0

    # its SMs paced it (cycles kept): time T = h(r) with r = s / T >= s_lb / T
    a = _fixed_point(lambda t: h(max(lo_r, min(1.0, s_lb / t))), s_lb)
    # its memory paced it (time kept, or simulated again at r, taking no less time than at the
    # maximum clock): T >= s = r h(r) and T >= c / r, c its pipes' busy time at the maximum clock
    c = min(busy_s, sm_s)
    b = _crossing(lambda r: r * r * h(r), c, lo_r)
    bc = max(lo_r * h(lo_r), c / lo_r) if b is None else (c / b if b < 1.0 else max(c, h(1.0)))
    return min(a, max(bc, s_lb))


def _fixed_point(g, lo: float) -> float:
    """The least T >= lo with T >= g(T), g non-increasing in T (bisection)."""
    if g(lo) <= lo:
        return lo
    hi = lo * 2
    while g(hi) > hi:
        hi *= 2
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if g(mid) > mid:
            lo = mid
        else:
            hi = mid
    return lo


def _crossing(phi, c: float, lo_r: float) -> float | None:
    """The r in [lo_r, 1] with phi(r) = c (phi increasing); 1.0 when phi(1) <= c; None when
    phi(lo_r) > c."""
    if phi(1.0) <= c:
        return 1.0
    if phi(lo_r) > c:
        return None
    lo, hi = lo_r, 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if phi(mid) < c:
            lo = mid
        else:
            hi = mid
    return lo
