"""Triton's layouts of a program's tiles, as its TritonGPU passes choose them: which dots are
warpgroup MMAs (wgmma, "v3") or mma.sync ("v2") and how their warps tile the result
(AccelerateMatmul), which layout every value takes from the dots it comes from or flows into
(RemoveLayoutConversions), and how many registers per thread a value holds in its layout.
``registers.estimate`` counts the live registers of these layouts (its docstring, steps 1-3, says
what each pass decides and how that matches the compiled kernels).
"""
from __future__ import annotations

from ..dsl import ir
from ..dsl.analysis import feeds_dot
from ..dsl.dtypes import dot_mode

MMA_ROWS, MMA_COLS = 16, 8        # rows x columns of one MMA block a warp holds (4 fp32 per thread)
WGMMA_ROWS = 64        # rows one Hopper warpgroup MMA (wgmma) covers; 4 warps make a warpgroup


def ceil_div(a: float, b: float) -> int:
    return int(-(-a // b))


def dot_kind(dot: ir.Dot, num_warps: int, arch: int) -> str:
    """``v3`` (wgmma), ``v2`` (mma.sync) or ``fma`` (``dtypes.dot_mode``'s FMA unit: fp32 or mixed
    operands, which the lowering asks for in IEEE fp32)."""
    if dot_mode(dot.a.dtype, dot.b.dtype)[1] == "fma":
        return "fma"
    return mma_kind(*dot.out.shape, num_warps, arch)


def mma_kind(m: int, n: int, num_warps: int, arch: int) -> str:
    """``v3`` (wgmma) or ``v2`` (mma.sync) for a 16-bit m x n dot result on ``num_warps`` warps."""
    return "v3" if arch >= 90 and num_warps % 4 == 0 and m % 64 == 0 and n % 8 == 0 else "v2"


def warps_per_tile(m: int, n: int, num_warps: int, kind: str, chained: bool) -> tuple:
    """(warps along M, warps along N) of an MMA result tile, as Triton's warpsPerTileV3/V2 pick them
    (``chained``: for v3, the result flows into another dot; for v2, the dot is connected to
    another that has no layout yet)."""
    if kind == "v3":
        if chained:
            return num_warps, 1
        wm, wn = 4, 1
        while wm * wn < num_warps:
            if m > MMA_ROWS * wm:
                wm *= 2
            else:
                wn *= 2
        return wm, wn
    if chained:
        return (num_warps, 1) if m >= n else (1, num_warps)
    wm, wn, rm, rn = 1, 1, ceil_div(m, MMA_ROWS), ceil_div(n, MMA_COLS)
    while wm * wn < num_warps:      # balance the M and N repetitions, ties towards M
        if rm >= rn:
            wm, rm = wm * 2, (rm // 2 if rm != 1 else rm)
        else:
            wn, rn = wn * 2, rn // 2
    return wm, wn


def mma_issued(kind: str, m: int, n: int, wm: int, wn: int) -> tuple:
    """(rows, columns) of MMA work the CTA's warps issue for an m x n result tiled wm x wn warps:
    a warp's mma.sync ("v2") covers at least 16 rows x 8 columns and a warpgroup's wgmma ("v3")
    at least 64 rows, so warps beyond what the tile has of those repeat the same block."""
    groups, rows = (max(1, wm // 4), WGMMA_ROWS) if kind == "v3" else (wm, MMA_ROWS)
    return groups * ceil_div(m, rows * groups) * rows, wn * ceil_div(n, MMA_COLS * wn) * MMA_COLS


def mma_tile_regs(m: int, n: int, wm: int, wn: int) -> int:
    """fp32 registers per thread of an m x n MMA result over wm x wn warps (16x8 per warp per block)."""
    return ceil_div(m, MMA_ROWS * wm) * ceil_div(n, MMA_COLS * wn) * 4


# --------------------------------------------------------------------------- the program's graph
class Graph:
    """Producers, users and enclosing loop of every value and op of a program."""

    def __init__(self, program: ir.Program):
        self.program = program
        self.producer, self.users, self.loop_of = {}, {}, {}
        self._visit(program.body, None)
        self.smem = feeds_dot(program)

    def _visit(self, ops, loop):
        for op in ops:
            self.loop_of[id(op)] = loop
            if hasattr(op, "out"):
                self.producer[op.out.id] = op
            for v in operands(op):
                self.users.setdefault(v.id, []).append(op)
            if isinstance(op, ir.Loop):
                self._visit(op.body, op)


def operands(op) -> list:
    """The tile values an op reads (a loop: its initial values)."""
    if isinstance(op, ir.Loop):
        return [v for v in op.init if isinstance(v, ir.Value)]
    if isinstance(op, ir.Store):
        return [op.value]
    return [getattr(op, f) for f in ("a", "b", "acc", "cond") if isinstance(getattr(op, f, None), ir.Value)]


def _dots_connected(g: Graph, dot: ir.Dot) -> list:
    """The other dots Triton's getSlice reaches from ``dot``: through producers and users in the
    same loop body (or both outside loops), not through transposes."""
    region = g.loop_of[id(dot)]
    seen, stack, found = {id(dot)}, [dot], []
    while stack:
        op = stack.pop()
        near = [g.producer.get(v.id) for v in operands(op)]
        if hasattr(op, "out"):
            near += g.users.get(op.out.id, [])
        for o in near:
            if o is None or id(o) in seen or isinstance(o, ir.Trans) or g.loop_of.get(id(o)) is not region:
                continue
            seen.add(id(o))
            stack.append(o)
            if isinstance(o, ir.Dot):
                found.append(o)
    return found


def _flows_into_dot(g: Graph, dot: ir.Dot) -> bool:
    """Whether the dot's result reaches another dot through its users (getForwardSlice)."""
    stack, seen = [dot.out], set()
    while stack:
        v = stack.pop()
        for o in g.users.get(v.id, []):
            if isinstance(o, ir.Dot):
                return True
            if hasattr(o, "out") and o.out.id not in seen:
                seen.add(o.out.id)
                stack.append(o.out)
    return False


def dot_layouts(g: Graph, arch: int) -> dict:
    """{id(dot): (kind, wm, wn)}; Triton converts the dots last to first."""
    w = g.program.num_warps
    dots = [o for o in ir.walk(g.program.body) if isinstance(o, ir.Dot)]
    out = {}
    for d in reversed(dots):
        kind = dot_kind(d, w, arch)
        m, n = d.out.shape
        if kind == "fma":
            out[id(d)] = (kind, 1, 1)
            continue
        if kind == "v3":
            out[id(d)] = (kind,) + warps_per_tile(m, n, w, kind, _flows_into_dot(g, d))
            continue
        near = _dots_connected(g, d)
        done = [out[id(o)] for o in near if id(o) in out and out[id(o)][0] != "fma"]
        out[id(d)] = (kind,) + (done[0][1:] if done else warps_per_tile(m, n, w, kind, bool(near)))
    return out


# --------------------------------------------------------------------------- value layouts
MMA, SLICE, OPERAND, SMEM, BLOCKED, BSLICE = "mma", "slice", "operand", "smem", "blocked", "bslice"


def _combine(op, lays: list):
    """Layout of an elementwise op's result from its operands' layouts."""
    shape = op.out.shape
    for lay in lays:
        if lay[0] == MMA:
            return lay if len(shape) == 2 else BLOCKED_LAYOUT
    sl = [lay for lay in lays if lay[0] == SLICE]
    if not sl:
        bs = [lay for lay in lays if lay[0] == BSLICE]
        return bs[0] if bs and (len(shape) == 1 or 1 in shape) else BLOCKED_LAYOUT
    if len(shape) == 2 and min(shape) > 1:      # two broadcasts of one parent: the full tile
        return (MMA, sl[0][1])
    return sl[0]


BLOCKED_LAYOUT = (BLOCKED,)


def _forward(g: Graph, lay: dict, ops) -> None:
    for op in ops:
        if isinstance(op, ir.Loop):
            for a, v in zip(op.args, op.init):
                lay[a.id] = lay.get(v.id, BLOCKED_LAYOUT) if isinstance(v, ir.Value) else BLOCKED_LAYOUT
            for _ in range(2):          # the carried values' layouts come from the body's yields
                _forward(g, lay, op.body)
                for a, y in zip(op.args, op.yields):
                    if isinstance(y, ir.Value) and lay.get(y.id, BLOCKED_LAYOUT)[0] != BLOCKED:
                        lay[a.id] = lay[y.id]
            for a, o in zip(op.args, op.outs):
                lay[o.id] = lay[a.id]
            continue
        if not hasattr(op, "out"):
            continue
        src = [lay.get(v.id, BLOCKED_LAYOUT) for v in operands(op)]
        if isinstance(op, ir.Dot):
            new = (MMA, id(op))
        elif isinstance(op, ir.Load):
            new = (SMEM,) if op.out.id in g.smem else BLOCKED_LAYOUT
        elif isinstance(op, ir.Reduce):
            if src[0][0] == MMA:
                new = (SLICE, src[0][1], op.axis)
            elif len(op.a.shape) == 2 and src[0][0] == BLOCKED:
                new = (BSLICE, op.a.shape, op.a.dtype, op.axis)
            else:
                new = _combine(op, src)
        elif isinstance(op, (ir.ExpandDims, ir.Trans)):
            new = src[0] if src[0][0] in (SLICE, SMEM, BSLICE) else _combine(op, src)
        elif isinstance(op, (ir.Full, ir.Iota)):
            new = BLOCKED_LAYOUT
        else:
            new = _combine(op, src)
        if new[0] != BLOCKED or op.out.id not in lay:     # keep what the backward pass found
            lay[op.out.id] = new


def _backward(g: Graph, lay: dict) -> bool:
    """Blocked operands of ops whose result has a dot's layout take that layout (Triton moves the
    conversion back to the loads and index vectors). Returns whether anything changed."""
    changed = False
    for op in ir.walk(g.program.body):
        out = lay.get(op.out.id) if hasattr(op, "out") else None
        if out is None or out[0] not in (MMA, SLICE) or isinstance(op, (ir.Dot, ir.Reduce)):
            continue
        for v in operands(op):
            if lay.get(v.id, BLOCKED_LAYOUT)[0] != BLOCKED:
                continue
            if isinstance(op, ir.ExpandDims) and out[0] == SLICE:
                lay[v.id] = out
            elif v.shape == op.out.shape or out[0] == SLICE:
                lay[v.id] = out
            elif len(v.shape) == 2 and 1 in v.shape:       # a broadcast row or column
                lay[v.id] = (SLICE, out[1], v.shape.index(1))
            else:
                continue
            changed = True
    return changed


def value_layouts(g: Graph, dots: dict) -> dict:
    """{value id: layout}: (mma, dot), (slice, dot, dim), (operand, dot), (smem,) or (blocked,)."""
    lay: dict = {}
    for _ in range(16):
        _forward(g, lay, g.program.body)
        if not _backward(g, lay):
            break
    for op in ir.walk(g.program.body):
        if isinstance(op, ir.Loop):         # initial values are made in the carried value's layout
            for a, v in zip(op.init, op.args):
                if isinstance(a, ir.Value) and isinstance(g.producer.get(a.id), ir.Full):
                    lay[a.id] = lay.get(v.id, BLOCKED_LAYOUT)
        if isinstance(op, ir.Dot) and _a_in_registers(op, lay, dots):
            lay[op.a.id] = (OPERAND, id(op))
    return lay


def _a_in_registers(d: ir.Dot, lay: dict, dots: dict) -> bool:
    """Whether a dot's computed A operand is converted to the operand layout in registers: always
    for wgmma (it reads A from registers); for mma.sync only from the result layout of a dot with
    the same warps, all along M (Triton's register shortcut); otherwise it goes through shared
    memory and is streamed like a loaded operand."""
    src = lay.get(d.a.id, BLOCKED_LAYOUT)
    if src[0] == SMEM:
        return False
    kind, wm, wn = dots[id(d)]
    if kind == "v3":
        return True
    return src[0] == MMA and dots[src[1]][1:] == (wm, wn) and wn == 1


def index_values(g: Graph) -> set:
    """Ids of integer values computed from index ranges and constants only (``arange`` offsets,
    their comparisons): ptxas keeps one base register and folds the rest into immediates."""
    out = set()
    for op in ir.walk(g.program.body):
        if not hasattr(op, "out") or op.out.dtype not in ("int32", "bool"):
            continue
        if isinstance(op, ir.Iota) or (not isinstance(op, (ir.Load, ir.Loop, ir.Reduce))
                                       and all(v.id in out for v in operands(op))):
            out.add(op.out.id)
    return out


def value_regs(v: ir.Value, lay: tuple, dots: dict, threads: int, numel: int | None = None) -> int:
    """32-bit registers per thread of value ``v`` in layout ``lay``; ``numel``: the elements that are
    not compile-time constants (a blocked tile)."""
    b = ir.DTYPE_BYTES[v.dtype]
    if v.dtype == "bool" or lay[0] == SMEM or not v.shape:
        return 0
    if lay[0] in (MMA, SLICE, OPERAND) and dots[lay[1]][0] != "fma":
        _, wm, wn = dots[lay[1]]
        if lay[0] == MMA:
            return ceil_div(mma_tile_regs(v.shape[0], v.shape[1], wm, wn) * b, 4)
        if lay[0] == OPERAND:
            return ceil_div(v.shape[0], MMA_ROWS * wm) * ceil_div(v.shape[1], 16) * 4 * b // 2
        n = max(v.shape)
        per = ceil_div(n, MMA_ROWS * wm) if lay[2] == 1 else ceil_div(n, MMA_COLS * wn)
        return ceil_div(per * 2 * b, 4)
    if lay[0] == BSLICE:        # a row (column) vector of a blocked tile: its rows per thread
        return ceil_div(blocked_split(lay[1], ir.DTYPE_BYTES[lay[2]], threads // 32)[1 - lay[3]] * b, 4)
    if len(v.shape) == 2 and numel is None:
        r, c = blocked_split(v.shape, b, threads // 32)
        return max(1, ceil_div(r * c * b, 4))
    return max(1, ceil_div((v.numel if numel is None else numel) * b, 4 * threads))


def blocked_split(shape: tuple, nbytes: int, num_warps: int) -> tuple:
    """(rows, columns) per thread of a 2-d tile in Triton's default blocked layout: 16-byte vectors
    along the row, a warp's 32 threads across the row first, warps down the rows; replicated where
    the tile is smaller."""
    rows, cols = shape
    vec = max(1, min(cols, 16 // nbytes))
    tc = max(1, min(32, cols // vec))
    tr = 32 // tc
    wr = max(1, min(num_warps, rows // tr))
    wc = max(1, num_warps // wr)
    return ceil_div(rows, tr * wr), ceil_div(cols, tc * vec * wc) * vec
