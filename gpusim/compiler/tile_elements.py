"""Which elements of a tile hold registers in the analytic register estimate (``registers.py``).

Elements a load reads past the end of the tensor at every offset it can have are the load's
constant ``other`` and cost nothing, and so do those of elementwise results of them and of index
values (``static_elements``); elements that only reach stores that always mask them off are dead
(``stored_elements``); a tile that only flows into reductions, a loop-carried accumulator or (in a
pipelined loop) stores is streamed: ptxas folds each element in as it arrives (``streamed``).

Measured by: the compiled register counts of the recorded sm_90 table
(tests/data/compiled_resources_sm90.json; docs/resources.md compares the estimate with them).
Effect: part of the compiler's view (docs/model.md, ablation "compiler view (registers, spills,
SASS)" off: median / p90 |error| +1.0 / +4.2 points on the recorded points, +0.8 / +2.0 held-out).
"""
from __future__ import annotations

import math

from ..dsl import ir
from ..dsl.analysis import expr_bounds
from .layouts import Graph, index_values, operands


def _in_bounds(tensor, offsets: tuple, shape: tuple) -> int:
    """Elements of a ``shape`` tile at ``offsets`` of ``tensor`` that can be in bounds: past the end
    at the smallest offset (program ids are >= 0, so a tile at ``pid * BLOCK`` whose rows reach
    past a shorter tensor always masks those rows) they never are."""
    lead = len(tensor.shape) - len(shape)
    n = 1
    for d, size in enumerate(shape):
        lo = expr_bounds(offsets[lead + d], None, {})[0]
        n *= size if math.isinf(lo) else max(0, min(size, tensor.shape[lead + d] - lo))
    return n


ELEMENTWISE = (ir.Binary, ir.Unary, ir.Where, ir.Cast)


def issued_share(v: ir.Value, live: int, num_warps: int, nbytes: int | None = None) -> float:
    """The share of a tile's per-thread register slots the compiled code still computes when only
    ``live`` of its elements are not compile-time constants (``static_elements``): a slot is
    dropped only where it is constant in every thread, so the live elements (the tile's first
    ``live`` in row-major order) keep whole slots of the blocked layout (16-byte vectors along the
    row, threads across the row); ``nbytes``: the element size of the load whose layout the tile
    keeps (``layout_bytes``). Only 1-d tiles (a row kernel's tile wider than its row: Triton's sm_90
    code for a layernorm over 112 columns has the same ~180 instructions at BLOCK 2,048 and
    8,192); a 2-d tile's padded rows (a dot's 16-row minimum) are left at the whole tile."""
    from .layouts import ceil_div

    if live >= v.numel or len(v.shape) != 1:
        return 1.0
    nbytes = nbytes or ir.DTYPE_BYTES.get(v.dtype, 4)
    threads = 32 * num_warps
    (n,) = v.shape
    vec = max(1, min(n, 16 // nbytes))
    span = vec * threads                   # elements one slot of every thread covers
    slots = ceil_div(n, span) * vec
    kept = sum(min(vec, max(0, live - r * span)) for r in range(ceil_div(n, span)))
    return max(1, kept) / slots


def static_elements(g: Graph) -> dict:
    """{value id: elements not known at compile time} for tiles read where they can reach past the
    tensor's end (a row kernel's tile wider than the row, decode's 16-row tile of 8 packed rows):
    the masked-off elements are the load's constant ``other`` and cost no registers; elementwise
    results inherit the count. Index values (``arange(0, BLOCK) < n`` masks, offsets) are known
    past the end too, so they do not stop it: layernorm's one-tile ``where(arange < n, t - mean,
    0.0)`` holds the row's in-bounds elements, not the whole tile. Likewise elements that only
    reach stores where they are always masked off are dead (``stored_elements``)."""
    out, index = {}, index_values(g)
    for op in ir.walk(g.program.body):
        if isinstance(op, ir.Load):
            n = _in_bounds(op.tensor, op.offsets, op.out.shape)
            if n < op.out.numel:
                out[op.out.id] = n
        elif isinstance(op, ELEMENTWISE):
            same = [v for v in operands(op) if v.shape == op.out.shape and v.id not in index]
            if same and all(v.id in out for v in same):
                out[op.out.id] = max(out[v.id] for v in same)
    for v, n in stored_elements(g).items():
        out[v] = min(n, out.get(v, n))
    return out


def bounded_index(g: Graph) -> dict:
    """{value id: elements that are not compile-time constants} of 1-d index masks against a
    constant bound (``arange(0, BLOCK) < n``, n a Python int): past ``n`` the comparison is false in
    every thread, so ptxas folds it; the ``arange`` itself where those masks are its only users."""
    out = {}
    for op in ir.walk(g.program.body):
        if (isinstance(op, ir.Binary) and op.op in ("lt", "le") and len(op.out.shape) == 1
                and isinstance(op.b, (int, float)) and not isinstance(op.b, bool)
                and isinstance(g.producer.get(getattr(op.a, "id", None)), ir.Iota)
                and expr_bounds(g.producer[op.a.id].start, None, {}) == (0, 0)):
            n = math.ceil(op.b) + (op.op == "le")
            if n < op.out.numel:
                out[op.out.id] = max(0, n)
    for op in ir.walk(g.program.body):
        if isinstance(op, ir.Iota) and len(op.out.shape) == 1:
            users = g.users.get(op.out.id, [])
            if users and all(getattr(u, "out", None) is not None and u.out.id in out for u in users):
                out[op.out.id] = max(out[u.out.id] for u in users)
    return out


def layout_bytes(g: Graph) -> dict:
    """{value id: element size of the load whose layout an elementwise chain keeps}."""
    out = {}
    for op in ir.walk(g.program.body):
        if isinstance(op, ir.Load):
            out[op.out.id] = ir.DTYPE_BYTES.get(op.out.dtype, 4)
        elif isinstance(op, ELEMENTWISE):
            src = [out[v.id] for v in operands(op) if v.shape == op.out.shape and v.id in out]
            if src:
                out[op.out.id] = min(src)
    return out


def stored_elements(g: Graph) -> dict:
    """{value id: elements that can reach memory or a use other than an elementwise op of the same
    shape} where fewer than all: the rest are dead (ptxas drops their computation; a loop-carried
    accumulator whose masked rows are never stored holds only its stored rows)."""
    vals, carried = [], {}
    for op in ir.walk(g.program.body):
        if hasattr(op, "out"):
            vals.append(op.out)
        if isinstance(op, ir.Loop):
            vals += list(op.args) + list(op.outs)
            for a, y, o in zip(op.args, op.yields, op.outs):
                if isinstance(y, ir.Value):
                    carried.setdefault(y.id, []).extend((a, o))
    need = {v.id: 0 for v in vals}
    for _ in range(64):
        changed = False
        for v in vals:
            n = max((need.get(x.id, x.numel) for x in carried.get(v.id, [])), default=0)
            for u in g.users.get(v.id, []):
                if isinstance(u, ir.Store):
                    n = max(n, _in_bounds(u.tensor, u.offsets, v.shape))
                elif isinstance(u, ELEMENTWISE) and u.out.shape == v.shape:
                    n = max(n, need.get(u.out.id, v.numel))
                elif isinstance(u, ir.Loop):
                    n = max([n] + [need.get(a.id, v.numel) for a, i in zip(u.args, u.init) if i is v])
                else:
                    n = v.numel
            if n > need[v.id]:
                need[v.id], changed = n, True
        if not changed:
            break
    numel = {x.id: x.numel for x in vals}
    return {v: n for v, n in need.items() if n < numel[v]}


def streamed(g: Graph) -> set:
    """Ids of values that only flow into reductions or into a loop-carried accumulator (``sum(o *
    do)``, ``acc + x * x``), through elementwise ops that use nothing computed from them: ptxas
    folds each element in as it arrives, so the tile is never held whole."""
    out: set = set()
    yielded = {y.id for lp in ir.walk(g.program.body) if isinstance(lp, ir.Loop)
               for y in lp.yields if isinstance(y, ir.Value)}
    for op in reversed([o for o in ir.walk(g.program.body) if hasattr(o, "out")]):
        users = g.users.get(op.out.id, [])
        if not users or op.out.id in yielded:
            continue
        if all(_sink(g, u, op.out) or (isinstance(u, (ir.Binary, ir.Unary, ir.Where, ir.Cast))
                                       and u.out.id in out and not _uses_own_reduction(g, u, op.out))
               for u in users):
            out.add(op.out.id)
    return out


def _sink(g: Graph, u, v: ir.Value) -> bool:
    """A reduction, an update of a loop-carried accumulator by ``v`` (acc + v, max(acc, v)), or a
    store in a pipelined loop (its loads are copied to shared memory ahead, so the stores need not
    wait for the whole tile: each vector is read, computed and stored in turn)."""
    loop = g.loop_of.get(id(u))
    if isinstance(u, ir.Reduce) or (isinstance(u, ir.Store) and loop is not None and loop.stages >= 2):
        return True
    if not isinstance(u, ir.Binary) or loop is None or u.op not in ("add", "maximum", "minimum"):
        return False
    other = u.b if u.a is v else u.a
    return isinstance(other, ir.Value) and other.shape == u.out.shape and other.id in {a.id for a in loop.args}


def _uses_own_reduction(g: Graph, op, v: ir.Value) -> bool:
    """Whether another operand of ``op`` is computed from a reduction of ``v``."""
    def from_v(x, seen):
        if x.id == v.id:
            return True
        src = g.producer.get(x.id)
        if src is None or x.id in seen:
            return False
        seen.add(x.id)
        return any(from_v(y, seen) for y in operands(src))
    return any(x.id != v.id and from_v(x, set()) for x in operands(op))
