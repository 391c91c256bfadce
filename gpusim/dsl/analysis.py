"""Facts about a program that several backends need, computed in one place.

This module owns the questions every consumer of the IR asks the same way: how a launch grid pads
to three axes and which program id a CTA number is, how many times a loop runs, which part of a
tile lies inside its tensor, which values are views (``trans``/``expand_dims``) of another and
which loaded tiles feed a ``dot``. The numpy executor, the timing model and the API read them from
here so that they cannot disagree.
"""
from __future__ import annotations

import math

from . import ir

GRID_AXES = 3


# --------------------------------------------------------------------------- grids and program ids
def pad_grid(grid) -> tuple:
    """The grid with missing trailing axes set to 1 (a 1-d grid (g,) is (g, 1, 1))."""
    return tuple(grid) + (1,) * (GRID_AXES - len(grid))


def program_id(cta: int, grid: tuple) -> tuple:
    """The (x, y, z) program id of the ``cta``-th program in launch order (x fastest)."""
    gx, gy, _ = pad_grid(grid)
    return cta % gx, (cta // gx) % gy, cta // (gx * gy)


def last_program_id(grid) -> tuple:
    """The program id with the largest index on every axis."""
    return tuple(g - 1 for g in pad_grid(grid))


def program_ids(grid):
    """Every program id of the grid, in launch order (x fastest, then y, then z)."""
    gx, gy, gz = pad_grid(grid)
    for z in range(gz):
        for y in range(gy):
            for x in range(gx):
                yield x, y, z


# --------------------------------------------------------------------------- loops
def trip_count(start: int, end: int, step: int) -> int:
    """Iterations of ``range(start, end, step)`` for a positive step."""
    return max(0, -(-(end - start) // step))


def loop_trips(loop, pid: tuple, loopvars: dict | None = None) -> int:
    """Iterations of a loop (anything with ``start``, ``end`` Exprs and an int ``step``) at ``pid``."""
    lv = loopvars or {}
    return trip_count(ir.eval_expr(loop.start, pid, lv), ir.eval_expr(loop.end, pid, lv), loop.step)


def uses_pid(e: ir.Expr) -> bool:
    """Whether an index expression depends on the program id."""
    if e.op == "pid":
        return True
    return e.op not in ("const", "loopvar") and any(uses_pid(a) for a in e.args)


def work_bound(launch: ir.Launch) -> int:
    """CTA-iterations of a launch, an upper bound for the executors' cost: every program counted
    as one plus the trips of every loop, evaluated at the last program id (where causal loops are
    longest)."""
    last = last_program_id(launch.grid)
    trips = 1 + sum(loop_trips(op, last) for op in ir.walk(launch.program.body) if isinstance(op, ir.Loop))
    return launch.num_programs * trips


# --------------------------------------------------------------------------- tile bounds
def tile_bounds(tensor: ir.TensorArg, offs, shape: tuple):
    """[(lo, hi)] per tensor dim of the part of a tile at ``offs`` that lies inside the tensor, or
    None when nothing does. The tile covers the last ``len(shape)`` dims; each leading offset picks
    one index (lo, lo + 1)."""
    dims = tensor.shape
    lead = len(dims) - len(shape)
    out = []
    for d, o in enumerate(offs):
        if d < lead:
            if not 0 <= o < dims[d]:
                return None
            out.append((o, o + 1))
        else:
            lo, hi = max(o, 0), min(o + shape[d - lead], dims[d])
            if hi <= lo:
                return None
            out.append((lo, hi))
    return out


def tile_slices(tensor: ir.TensorArg, offs, shape: tuple):
    """(tensor index, tile index) of the part of a tile inside the tensor (numpy indices), or
    (None, None). Leading dims index the tensor with an int and do not appear in the tile."""
    b = tile_bounds(tensor, offs, shape)
    if b is None:
        return None, None
    lead = len(tensor.shape) - len(shape)
    src = tuple(lo if d < lead else slice(lo, hi) for d, (lo, hi) in enumerate(b))
    dst = tuple(slice(lo - offs[d], hi - offs[d]) for d, (lo, hi) in enumerate(b) if d >= lead)
    return src, dst


def tile_bytes_in_bounds(tensor: ir.TensorArg, offs, shape: tuple):
    """(rows, row_bytes, first byte offset, row pitch in bytes) of the part of a tile inside the
    tensor, or None. A 1-d tile is one row; a 2-d tile's rows run along the second-to-last dim."""
    b = tile_bounds(tensor, offs, shape)
    if b is None:
        return None
    es = ir.DTYPE_BYTES[tensor.dtype]
    dims = tensor.shape
    flat = 0
    for d, (lo, _) in enumerate(b):
        flat = flat * dims[d] + lo
    rows = b[-2][1] - b[-2][0] if len(shape) == 2 else 1
    return rows, (b[-1][1] - b[-1][0]) * es, flat * es, dims[-1] * es


# --------------------------------------------------------------------------- views and dot operands
VIEW_OPS = (ir.Trans, ir.ExpandDims)


def view_root(alias: dict, op) -> None:
    """Record in ``alias`` (value id -> id of the value it views) a view op's output; ops that are
    not views are ignored. Chains of views resolve to the first non-view value."""
    if isinstance(op, VIEW_OPS):
        alias[op.out.id] = alias.get(op.a.id, op.a.id)


_ELEMENTWISE = (ir.Binary, ir.Unary, ir.Where, ir.Cast, ir.Trans, ir.ExpandDims)


def chained_dot_outputs(program: ir.Program) -> set:
    """Ids of Dot outputs that reach another Dot's ``a`` operand through elementwise ops, casts and
    views (flash's ``S = Q K^T`` -> ``P`` -> ``P V``): the first dot of a chain, whose result the
    second needs whole rows of, in registers."""
    producer = {}
    for op in ir.walk(program.body):
        if hasattr(op, "out"):
            producer[op.out.id] = op
    out: set = set()
    for op in ir.walk(program.body):
        if not isinstance(op, ir.Dot):
            continue
        stack, seen = [op.a], set()
        while stack:
            v = stack.pop()
            src = producer.get(getattr(v, "id", None))
            if src is None or id(src) in seen:
                continue
            seen.add(id(src))
            if isinstance(src, ir.Dot):
                out.add(src.out.id)
            elif isinstance(src, _ELEMENTWISE):
                stack += [getattr(src, f) for f in ("a", "b") if isinstance(getattr(src, f, None), ir.Value)]
    return out


def _uses(ops) -> dict:
    """How many times each value id is read by ``ops`` (loop bodies, inits and yields included)."""
    n: dict = {}

    def read(v):
        if isinstance(v, ir.Value):
            n[v.id] = n.get(v.id, 0) + 1

    for op in ir.walk(ops):
        for f in op.__dataclass_fields__:
            if f in ("out", "outs", "args", "body"):
                continue
            v = getattr(op, f)
            for x in (v if isinstance(v, tuple) else (v,)):
                read(x)
    return n


def fma_contractions(program: ir.Program) -> frozenset:
    """Ids of the ``add``/``sub`` outputs that the compiler contracts with the multiply feeding them
    into one fused multiply-add (FFMA, or HFMA2 on 16-bit floats): a float ``mul`` whose only
    reader is an ``add``/``sub`` of the same shape in the same op list. LLVM's NVPTX backend
    contracts ``fmul`` + ``fadd`` by default and Triton emits no ``.rn`` that would forbid it
    (the compiled SASS of ``x * a + b`` is one FFMA per element: benchmarks/kernels/spill_live.py).
    The add then issues nothing of its own: the pair costs the multiply's one instruction."""
    uses = _uses(program.body)
    out: set = set()

    def visit(ops):
        muls = {}
        for op in ops:
            if isinstance(op, ir.Loop):
                visit(op.body)
            elif isinstance(op, ir.Binary) and op.op == "mul" and op.out.dtype in ir.FLOAT_DTYPES:
                muls[op.out.id] = op
            elif isinstance(op, ir.Binary) and op.op in ("add", "sub") and op.out.dtype in ir.FLOAT_DTYPES:
                for v in (op.a, op.b):
                    m = muls.get(getattr(v, "id", None))
                    if m is not None and uses.get(m.out.id) == 1 and m.out.shape == op.out.shape:
                        out.add(op.out.id)
                        del muls[m.out.id]
                        break
    visit(program.body)
    return frozenset(out)


def feeds_dot(program: ir.Program) -> set:
    """Ids of the values that reach a Dot operand through views: loaded ones live in shared memory."""
    alias: dict = {}
    operands = set()
    for op in ir.walk(program.body):
        view_root(alias, op)
        if isinstance(op, ir.Dot):
            for v in (op.a, op.b):
                operands.add(alias.get(v.id, v.id))
    return operands


# --------------------------------------------------------------------------- interval analysis
def _mul_bound(x, y):
    return 0 if x == 0 or y == 0 else x * y


def expr_bounds(e: ir.Expr, pid_hi, loop_rng: dict) -> tuple:
    """Inclusive (lo, hi) of an index expression; +-inf where unknown.

    ``pid_hi`` holds the largest program id per grid axis (None: unbounded); ``loop_rng``
    the inclusive range of each enclosing loop variable."""
    op = e.op
    if op == "const":
        return e.args[0], e.args[0]
    if op == "pid":
        k = e.args[0]
        if pid_hi is None:
            return 0, math.inf
        return 0, pid_hi[k] if k < len(pid_hi) else 0
    if op == "loopvar":
        return loop_rng.get(e.args[0], (-math.inf, math.inf))
    (alo, ahi), (blo, bhi) = (expr_bounds(x, pid_hi, loop_rng) for x in e.args)
    if op == "add":
        return alo + blo, ahi + bhi
    if op == "sub":
        return alo - bhi, ahi - blo
    if op == "mul":
        corners = [_mul_bound(x, y) for x in (alo, ahi) for y in (blo, bhi)]
        return min(corners), max(corners)
    if op == "floordiv":
        if blo == bhi and isinstance(blo, int) and blo > 0:
            return tuple(v if math.isinf(v) else v // blo for v in (alo, ahi))
        return -math.inf, math.inf
    if op == "min":
        return min(alo, blo), min(ahi, bhi)
    if op == "max":
        return max(alo, blo), max(ahi, bhi)
    raise ValueError(f"unknown index op {op!r}")
