"""The step list with the compiler's view applied: each loop's SIMT steps raised to its compiled
body's issue and SFU cycles (``issue.py``) and given its dependent-chain cycles as their least time
(``warp.py``), its tensor steps scaled by the work the compiler duplicates (``duplication.py``), its
spill traffic set (``spills.py``) and the round trips of its tiles staged through registers
(``staging.register_rounds``), all per ``unroll.py`` iterations; the straight-line code's
dependent-chain cycles (the compiled body's, else ``straight_estimate.py``'s from the DSL ops)
shared among the SIMT steps outside loops. Each mechanism's module says
what it models, how it was measured and what it earns; this module only puts them on the steps."""
from __future__ import annotations

from ...dsl import ir
from ...hardware import GPUConfig
from .duplication import tensor_duplication
from .issue import body_mixes, loop_issue_cycles
from .loop_estimate import estimated_loops
from .spills import loop_spill_bytes_per_thread, spill_bytes_per_iteration
from .staging import register_rounds
from .unroll import unroll_factor
from .straight_estimate import estimated_straight_cycles
from .warp import loop_latency_cycles, straight_cycles


def _simt_shares(loops: list) -> list:
    """Each loop's share of the loops' SIMT pipe time per iteration (equal shares when none has any)."""
    from .steps import SimtStep

    if not loops:
        return []
    t = [sum(max(b.vector_cycles, b.sfu_cycles) for b in s.body if isinstance(b, SimtStep)) for s in loops]
    tot = sum(t)
    return [x / tot for x in t] if tot else [1.0 / len(loops)] * len(loops)


def estimated_duplication(loops: list) -> float:
    """Without the compiled kernel, ``duplication.tensor_duplication``'s factor from the tile program:
    the MMA work the loops issue (each tensor step's FLOPs times its ``est_dup``,
    ``cost.mma_duplication``) over the work their tiles hold, the loops together, >= 1."""
    from .steps import TensorStep

    steps = [b for s in loops for b in s.body if isinstance(b, TensorStep)]
    tile = sum(b.flops for b in steps)
    return max(1.0, sum(b.flops * b.est_dup for b in steps) / tile) if tile else 1.0


def _scaled_body(body: tuple, dup, issue, unroll: int, latency: float = 0.0, reloads: bool = False) -> tuple:
    """A loop body with its tensor steps scaled by ``dup`` (None: each step's own ``est_dup``),
    its SIMT steps raised to the compiled loop's issue and SFU cycles per iteration (never
    lowered), and ``latency`` (the compiled body's dependent-chain cycles) shared among its SIMT
    steps, in proportion to their pipe time, as the least time they take. A body without SIMT
    steps whose compiled loop reloads spilled registers (``reloads``) gets a step that holds no
    pipe and lasts what the chain takes beyond its tensor steps: the iteration takes at least the
    chain (a split-K GEMV that spills: ``benchmarks/spill_reload_chain.py``)."""
    from dataclasses import replace

    from .steps import SimtStep, TensorStep

    def scaled(b):
        f = b.est_dup if dup is None else dup
        return replace(b, cycles=b.cycles * f) if f > 1.0 else b

    body = tuple(scaled(b) if isinstance(b, TensorStep) else b for b in body)
    if issue is None:
        return body
    vec = sum(b.vector_cycles for b in body if isinstance(b, SimtStep))
    sfu = sum(b.sfu_cycles for b in body if isinstance(b, SimtStep))
    fv = max(1.0, issue[0] / unroll / vec) if vec else 1.0
    fs = max(1.0, issue[1] / unroll / sfu) if sfu else 1.0
    body = tuple(replace(b, vector_cycles=b.vector_cycles * fv, sfu_cycles=b.sfu_cycles * fs)
                 if isinstance(b, SimtStep) else b for b in body)
    pipe = sum(max(b.vector_cycles, b.sfu_cycles) for b in body if isinstance(b, SimtStep))
    if latency > 0 and not pipe and reloads:
        rest = latency / unroll - sum(b.cycles for b in body if isinstance(b, TensorStep))
        return body + (SimtStep(0.0, 0.0, 0.0, 0.0, min_cycles=rest),) if rest > 0 else body
    if latency <= 0 or not pipe:
        return body
    return tuple(replace(b, min_cycles=latency / unroll * max(b.vector_cycles, b.sfu_cycles) / pipe)
                 if isinstance(b, SimtStep) else b for b in body)


def _rounds(compiled, nloops: int, unroll: int) -> list:
    """Each compiled loop's ``staging.register_rounds`` (1 where the bodies are unknown)."""
    bodies = getattr(compiled, "loop_bodies", None) or ()
    return [register_rounds(b, unroll) for b in bodies] if len(bodies) == nloops else [1.0] * nloops


def adjust_loops(steps: tuple, program: ir.Program, occupancy, cfg: GPUConfig) -> tuple:
    """The step list with each loop's SIMT steps raised to its compiled body's issue and SFU
    cycles and given its dependent-chain cycles as their least time, its tensor steps scaled by the
    work the compiler duplicates across warps (without the compiled kernel, the same factor from
    the warp tiling, ``estimated_duplication``), and its spill traffic set; the compiled loops'
    counts are per ``unroll_factor`` iterations. Each loop takes its own body's counts
    (``body_mixes``); when the bodies are unknown, the loops' summed counts are shared among them
    in proportion to their SIMT time."""
    from dataclasses import replace

    from .steps import LoopStep

    compiled = getattr(occupancy, "compiled", None)
    loops = [s for s in steps if isinstance(s, LoopStep)]
    latency = [0.0] * len(loops)
    rounds = [1.0] * len(loops)     # estimated: no SASS to count the copy's registers in
    if compiled is not None:
        unroll = unroll_factor(compiled, program, loops)
        dup = tensor_duplication(compiled, program.num_warps, loops, unroll)
        w = 32 * program.num_warps / unroll
        mixes = body_mixes(compiled, len(loops))
        if mixes is None:        # bodies unknown: the loops together, shared by their SIMT time
            share = _simt_shares(loops)
            issue = loop_issue_cycles(compiled, program.num_warps, cfg)
            issue = [None if issue is None else (issue[0] * f, issue[1] * f) for f in share]
            spill = [loop_spill_bytes_per_thread(compiled) * w * f for f in share]
            spill_st = [loop_spill_bytes_per_thread(compiled, ("STL",)) * w * f for f in share]
        else:
            issue = [loop_issue_cycles(compiled, program.num_warps, cfg, m) for m in mixes]
            spill = [loop_spill_bytes_per_thread(compiled, mix=m) * w for m in mixes]
            spill_st = [loop_spill_bytes_per_thread(compiled, ("STL",), m) * w for m in mixes]
        per_body = loop_latency_cycles(compiled, program.num_warps, cfg)
        if per_body and len(per_body) == len(loops):   # compiled loops in program order
            latency = per_body
        rounds = _rounds(compiled, len(loops), unroll)
    else:
        from .cost import cta_resources

        unroll, dup = 1, estimated_duplication(loops)
        est = spill_bytes_per_iteration(program, None, cta_resources(program).registers_per_thread,
                                        cfg.max_registers_per_thread)
        issue = [None] * len(loops)
        body = estimated_loops(program, cfg)       # the loops' floors and mixes from their DSL ops
        if len(body) == len(loops):
            latency, issue = [c for c, _ in body], [i for _, i in body]
        spill = [est] * len(loops)
        spill_st = [est / 2.0] * len(loops)     # every register past the limit is stored and reloaded once
    k = iter(range(len(loops)))
    out = []
    for s in steps:
        if isinstance(s, LoopStep):
            i = next(k)
            reloads = compiled is not None and spill[i] > spill_st[i]     # estimated: no reloads in its chains
            s = replace(s, body=_scaled_body(s.body, dup, issue[i], unroll, latency[i], reloads), spill_bytes=spill[i],
                        spill_store_bytes=spill_st[i], register_rounds=rounds[i])
        out.append(s)
    steps = tuple(out)
    straight = (straight_cycles(compiled, program.num_warps, cfg) if compiled is not None
                else estimated_straight_cycles(program, cfg))
    return _straight_latency(steps, straight)


def _straight_latency(steps: tuple, latency: float) -> tuple:
    """``steps`` with ``latency`` (the straight-line code's dependent-chain cycles) shared among its
    SIMT steps outside loops, in proportion to their pipe time, as the least time they take."""
    from dataclasses import replace

    from .steps import SimtStep

    pipe = sum(max(s.vector_cycles, s.sfu_cycles) for s in steps if isinstance(s, SimtStep))
    if latency <= 0 or not pipe:
        return steps
    return tuple(replace(s, min_cycles=max(s.min_cycles, latency * max(s.vector_cycles, s.sfu_cycles) / pipe))
                 if isinstance(s, SimtStep) else s for s in steps)
