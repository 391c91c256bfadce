"""A program compiled for the timing model: a list of typed steps with their costs on one config.

This module owns turning IR ops into what a CTA walks in ``engine.py``:

* ``Issue``: start an asynchronous tile load (``LoadDesc``); a load of a pipelined loop is
  issued by the loop itself, ``stages - 1`` iterations ahead, so loop bodies hold no ``Issue``;
* ``Wait``: block until a load arrives, placed before the first op that uses the tile (or a view
  of it);
* ``StoreStep``: write a tile to HBM through the L2;
* ``TensorStep``: a ``dot`` on the tensor pipe; ``SimtStep``: a run of consecutive elementwise,
  reduction and special-function ops merged into one step on the vector and SFU pipes;
* ``LoopStep``: a loop, with the loads its body issues and its compiled body.

Costs come from ``cost.py``; views (trans, expand_dims) are free and produce no step.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ...compiler.layouts import Graph
from ...compiler.tile_elements import bounded_index, issued_share, layout_bytes, static_elements
from ...dsl import analysis, ir
from ...hardware import GPUConfig
from . import cost


@dataclass(frozen=True, slots=True)
class LoadDesc:
    """One tile load of the program: which tensor, at which (symbolic) offsets, which tile shape,
    and whether the tile is staged in shared memory (it feeds a dot)."""

    idx: int
    tensor: str
    offsets: tuple
    shape: tuple
    sram: bool
    after_dot: bool = False     # a dot comes before it in its op list (flash's V after Q K^T)
    via_registers: bool = False  # staged, but loaded with LDG and stored with STS (a one-stage loop)


@dataclass(frozen=True, slots=True)
class Issue:
    load: LoadDesc


@dataclass(frozen=True, slots=True)
class Wait:
    load: int           # LoadDesc.idx


@dataclass(frozen=True, slots=True)
class StoreStep:
    op: ir.Store


@dataclass(frozen=True, slots=True)
class OpStep:
    """A compute op before costing (only in the output of ``lower``)."""

    op: object


@dataclass(frozen=True, slots=True)
class TensorStep:
    cycles: float
    flops: float
    est_dup: float = 1.0    # without the compiled kernel: times the compiler repeats this dot (cost.mma_duplication)


@dataclass(frozen=True, slots=True)
class SimtStep:
    vector_cycles: float
    sfu_cycles: float
    flops: float
    sfu_ops: float
    min_cycles: float = 0.0     # the least time the step takes (its warps' dependent chains), pipes held or not


@dataclass(frozen=True, slots=True)
class LoopStep:
    start: ir.Expr
    end: ir.Expr
    step: int
    stages: int
    var: int
    loads: tuple        # LoadDesc issued by the loop, once per iteration
    body: tuple
    spill_bytes: float = 0.0   # local-memory bytes (spill stores + reloads) one iteration moves
    spill_store_bytes: float = 0.0   # of which stores (STL: written through the L1 to the L2)
    register_rounds: float = 1.0     # round trips of a tile staged through registers (staging.register_rounds)


def lower(ops, shared: set, loads: list) -> list:
    """Ops -> uncosted steps; every load is appended to ``loads`` (its index is its ``idx``)."""
    steps = []
    pending = {}        # value id -> load idx not yet waited for
    alias: dict = {}
    dot_before = False

    for op in ops:
        if isinstance(op, ir.Load):
            d = LoadDesc(len(loads), op.tensor.name, op.offsets, op.out.shape, op.out.id in shared, dot_before)
            loads.append(d)
            pending[op.out.id] = d.idx
            steps.append(Issue(d))
            continue
        if isinstance(op, analysis.VIEW_OPS):
            analysis.view_root(alias, op)
            continue
        if isinstance(op, ir.Loop):
            first = len(loads)
            body = [s for s in lower(op.body, shared, loads) if not isinstance(s, Issue)]
            if max(1, op.stages) == 1:      # no cp.async at one stage (staging.one_stage_serial)
                loads[first:] = [replace(d, via_registers=True) if d.sram else d for d in loads[first:]]
            steps.append(LoopStep(op.start, op.end, op.step, max(1, op.stages), op.var,
                                  tuple(loads[first:]), tuple(body)))
            continue
        for f in op.__dataclass_fields__:
            v = getattr(op, f)
            if f != "out" and isinstance(v, ir.Value):
                vid = alias.get(v.id, v.id)
                if vid in pending:
                    steps.append(Wait(pending.pop(vid)))
        steps.append(StoreStep(op) if isinstance(op, ir.Store) else OpStep(op))
        dot_before = dot_before or isinstance(op, ir.Dot)
    return steps


def attach_costs(steps, cfg: GPUConfig, num_warps: int, dup: dict | None = None,
                 fused: frozenset = frozenset(), live: dict | None = None) -> tuple:
    """Merge consecutive compute ops into pipe steps with cycle costs. ``dup``: {dot output id:
    times the compiler issues that dot's MMA work} (``cost.mma_duplication``; the ``est_dup`` of
    its step, 1 when absent); ``fused``: ids of the adds the compiler contracts with their multiply into one FMA
    (``analysis.fma_contractions``), which issue nothing beyond the multiply's cost; ``live``: {value id:
    elements that are not compile-time constants} (``tile_elements.static_elements``): a SIMT op on such
    a tile issues only the register slots those elements keep (``tile_elements.issued_share``)."""
    out = []
    simt = None         # [vector cycles, sfu cycles, flops, sfu ops] of the SIMT run being merged
    for s in steps:
        if isinstance(s, OpStep):
            c = cost.op_cost(s.op, cfg, num_warps)
            v = s.op.a if isinstance(s.op, ir.Reduce) else s.op.out
            if live and v.id in live and not c.tensor_cycles:
                f = issued_share(v, live[v.id][0], num_warps, live[v.id][1])
                c = replace(c, simt_cycles=c.simt_cycles * f, sfu_cycles=c.sfu_cycles * f, sfu_ops=c.sfu_ops * f)
            if s.op.out.id in fused:     # the add of a fused multiply-add: its FLOPs, no cycles
                simt = simt or [0.0, 0.0, 0.0, 0.0]
                simt[2] += cost.vector_flops(s.op)
                continue
            if c.tensor_cycles:
                if simt:
                    out.append(SimtStep(*simt))
                    simt = None
                out.append(TensorStep(c.tensor_cycles, c.tensor_flops, (dup or {}).get(s.op.out.id, 1.0)))
            elif c.simt_cycles or c.sfu_cycles:
                if simt is None:
                    simt = [0.0, 0.0, 0.0, 0.0]
                simt[0] += c.simt_cycles
                simt[1] += c.sfu_cycles
                simt[2] += cost.vector_flops(s.op)
                simt[3] += c.sfu_ops
            continue
        if simt:
            out.append(SimtStep(*simt))
            simt = None
        if isinstance(s, LoopStep):
            out.append(LoopStep(s.start, s.end, s.step, s.stages, s.var, s.loads,
                                attach_costs(s.body, cfg, num_warps, dup, fused, live)))
        else:
            out.append(s)
    if simt:
        out.append(SimtStep(*simt))
    return tuple(out)


def compile_program(program: ir.Program, cfg: GPUConfig) -> tuple:
    """(steps, loads) of a program on ``cfg``: the costed step list and every LoadDesc by idx."""
    loads: list = []
    raw = lower(program.body, analysis.feeds_dot(program), loads)
    return attach_costs(raw, cfg, program.num_warps, cost.mma_duplication(program, cfg.compute_capability or 90),
                        analysis.fma_contractions(program), _live(program)), tuple(loads)


def _live(program: ir.Program) -> dict:
    """{value id: (elements not compile-time constants, element size of its layout's load)}."""
    g = Graph(program)
    nbytes, live = layout_bytes(g), {**bounded_index(g), **static_elements(g)}
    two = min(nbytes.values(), default=None)       # an index mask takes the layout of the tiles it masks
    return {v: (n, nbytes.get(v, two)) for v, n in live.items()}


def arithmetic(steps) -> tuple:
    """(tensor FLOPs, vector FLOPs, SFU ops) of one pass over ``steps``, loops not included."""
    t = v = f = 0.0
    for s in steps:
        if isinstance(s, TensorStep):
            t += s.flops
        elif isinstance(s, SimtStep):
            v += s.flops
            f += s.sfu_ops
    return t, v, f
