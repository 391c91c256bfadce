"""Analytic estimate of registers per thread of a program's Triton kernel (the fallback when the
real compiler is not at hand; ``backends/triton/compile.py`` reads the real count).

The estimate gives every tile the layout Triton gives it and counts the registers live at the
busiest point of the program, as a register allocator would:

1. **Dot layouts** (TritonGPU's AccelerateMatmul pass). A ``dot`` is a warpgroup MMA (wgmma, "v3")
   on sm_90 when num_warps is a multiple of 4, 64 | M and 8 | N, else an mma.sync ("v2"). Its
   result is spread over (wm, wn) warps in 16x8 blocks, 4 fp32 values per thread per block, and
   replicated where the tile is smaller than the warps cover. Warps per tile follow Triton's
   warpsPerTileV3/V2: a v3 dot whose result flows into another dot (flash's S, the backward's
   S^T and dP^T) puts all warps along M, even when M is too short for them (replicated); other v3
   dots double warps along M while M has more than 16 rows per warp, then along N. The dots are
   converted last to first: a v2 dot connected to others (through any ops but transposes, in its
   loop body) takes the warps of one already converted; the first converted puts all warps along
   its longer side (the backward's dK/dV at BLOCK_N 32, d 64: all 4 warps along N); an unconnected
   v2 dot balances its M and N repetitions.
2. **Value layouts** (RemoveLayoutConversions). Values computed from a dot's result keep its
   layout; a row reduction gives a slice of it (2 registers per 16 rows a warp owns, 2 per 8
   columns for a column vector), and vectors and broadcasts combined with such values take the
   slice layout too. Other tiles are in the default blocked layout (16-byte vectors along the
   row, threads across it, warps down the rows); a reduction of one holds the rows per thread.
   Integer index vectors (``arange`` and what is computed from them alone) cost one register:
   ptxas folds the rest into immediates. Elements a load reads past the end of the tensor at
   every offset it can have (constant offsets, or ``pid * BLOCK`` as program ids are >= 0) are
   the constant ``other`` and cost nothing, and so do those of elementwise results of them and of
   index values (a mask ``arange < n`` selecting a constant: layernorm's centred row); elements
   that only reach stores that always mask them off are dead, in a loop-carried accumulator too
   (decode's combine: a 16-row tile of 8 packed query rows holds 8 rows).
3. **Operands**. A loaded tile that feeds a dot lives in shared memory: in a loop pipelined 2+
   stages deep it is copied there asynchronously (cp.async, no registers); without pipelining it
   passes through registers, one per 16-byte vector. wgmma reads B from shared memory and A from
   registers when A is computed (flash's P: 4 registers per 16x16 block a warp owns). mma.sync
   reads both from shared memory one 16-wide K slice at a time; a computed A stays in registers
   only when its producer has the same warps, all along M (Triton's register shortcut), otherwise
   it goes through shared memory like a loaded operand. A wgmma that accumulates into a carried
   value is left in flight across a pipelined loop's back edge (Triton waits for it at the next
   iteration's first dot), so its register A operand is live from the loop's top to that dot.
4. **Liveness**. A value is live from its definition to its last use; one defined before a loop
   and used in it, to the loop's end; a loop-carried value from the loop's top to its last use,
   its next version from its definition to the loop's end. An elementwise op may write over an
   operand that dies there. A tile that only flows into reductions, into a loop-carried
   accumulator or (in a pipelined loop) into stores, through ops that use nothing computed from
   it, is streamed: ptxas folds each element in as it arrives, so only a loaded tile's 16-byte
   vectors in flight count; except a tile loaded in a loop that is not pipelined (stages < 2),
   whose loads ptxas issues all before the first use: it is held whole (decode's combine holds
   its accumulator and the partial output it adds). A tile computed by an elementwise op and used
   only by elementwise ops of its shape and layout in the same loop body, with nothing but
   elementwise ops between its definition and its last use, is a per-element temporary: ptxas
   computes the chain element by element, so it costs nothing and the tiles it is computed from
   stay live to the chain's last op that reads it (softmax's online-max loop holds m, l, the new
   m and the loaded fp16 chunk, not its fp32 copy and each intermediate tile in turn).

The estimate is the largest live sum, plus one register per 16-byte vector loaded per loop
iteration in kernels with dots (their addresses), plus a base per kernel kind fitted to ptxas
(``COEF``). docs/resources.md compares it with the compiled counts
(tests/data/compiled_resources_sm90.json, and the H200's).
"""
from __future__ import annotations

import math

from ...dsl import ir
from ...dsl.analysis import feeds_dot
from ...dsl.analysis import expr_bounds

# The only fitted numbers: registers a kernel needs beyond its tiles (program ids, loop counters,
# base pointers, masks, ptxas's temporaries), one per kernel kind: wgmma kernels ("v3"), mma.sync
# kernels ("v2"), kernels without a dot ("simt") and those of them with a reduction ("reduce":
# its warp shuffles and cross-warp exchange). Each is the median of (compiled - counted) over the
# non-spilling launches of the development half of the recorded sm_90 table (configs whose
# crc32 of their params is even; ``record_resources.py --compare`` reports both halves).
COEF = {"v3": {"base": 25}, "v2": {"base": 25}, "simt": {"base": 10}, "reduce": {"base": 20}}
MMA_ROWS, MMA_COLS = 16, 8        # rows x columns of one MMA block a warp holds (4 fp32 per thread)


def _ceil(a: float, b: float) -> int:
    return int(-(-a // b))


def dot_kind(dot: ir.Dot, num_warps: int, arch: int) -> str:
    """``v3`` (wgmma), ``v2`` (mma.sync) or ``fma`` (fp32 operands: the lowering asks for IEEE fp32)."""
    m, n = dot.out.shape
    if "fp32" in (dot.a.dtype, dot.b.dtype):
        return "fma"
    if arch >= 90 and num_warps % 4 == 0 and m % 64 == 0 and n % 8 == 0:
        return "v3"
    return "v2"


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
    wm, wn, rm, rn = 1, 1, _ceil(m, MMA_ROWS), _ceil(n, MMA_COLS)
    while wm * wn < num_warps:      # balance the M and N repetitions, ties towards M
        if rm >= rn:
            wm, rm = wm * 2, (rm // 2 if rm != 1 else rm)
        else:
            wn, rn = wn * 2, rn // 2
    return wm, wn


def mma_tile_regs(m: int, n: int, wm: int, wn: int) -> int:
    """fp32 registers per thread of an m x n MMA result over wm x wn warps (16x8 per warp per block)."""
    return _ceil(m, MMA_ROWS * wm) * _ceil(n, MMA_COLS * wn) * 4


# --------------------------------------------------------------------------- the program's graph
class _Graph:
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


def _dots_connected(g: _Graph, dot: ir.Dot) -> list:
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


def _flows_into_dot(g: _Graph, dot: ir.Dot) -> bool:
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


def dot_layouts(g: _Graph, arch: int) -> dict:
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


def _forward(g: _Graph, lay: dict, ops) -> None:
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


def _backward(g: _Graph, lay: dict) -> bool:
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


def value_layouts(g: _Graph, dots: dict) -> dict:
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


def index_values(g: _Graph) -> set:
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
            return _ceil(mma_tile_regs(v.shape[0], v.shape[1], wm, wn) * b, 4)
        if lay[0] == OPERAND:
            return _ceil(v.shape[0], MMA_ROWS * wm) * _ceil(v.shape[1], 16) * 4 * b // 2
        n = max(v.shape)
        per = _ceil(n, MMA_ROWS * wm) if lay[2] == 1 else _ceil(n, MMA_COLS * wn)
        return _ceil(per * 2 * b, 4)
    if lay[0] == BSLICE:        # a row (column) vector of a blocked tile: its rows per thread
        return _ceil(blocked_split(lay[1], ir.DTYPE_BYTES[lay[2]], threads // 32)[1 - lay[3]] * b, 4)
    if len(v.shape) == 2 and numel is None:
        r, c = blocked_split(v.shape, b, threads // 32)
        return max(1, _ceil(r * c * b, 4))
    return max(1, _ceil((v.numel if numel is None else numel) * b, 4 * threads))


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
    return _ceil(rows, tr * wr), _ceil(cols, tc * vec * wc) * vec


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


def static_elements(g: _Graph) -> dict:
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


def stored_elements(g: _Graph) -> dict:
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


def streamed(g: _Graph) -> set:
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


def _sink(g: _Graph, u, v: ir.Value) -> bool:
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


def _uses_own_reduction(g: _Graph, op, v: ir.Value) -> bool:
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


# --------------------------------------------------------------------------- liveness
def _schedule(ops, loop, out: list, spans: dict) -> None:
    """Flatten ``ops`` into ``out`` (op, enclosing loop) in program order; ``spans[id(loop)]``
    is the (first, last) index of a loop's body."""
    for op in ops:
        out.append((op, loop))
        if isinstance(op, ir.Loop):
            first = len(out)
            _schedule(op.body, op, out, spans)
            spans[id(op)] = (first - 1, len(out))
            out.append((None, op))      # the loop's end


def _live_ranges(g: _Graph) -> tuple:
    """(schedule, {value id: (def index, last use index)}, loop spans) over the flattened program."""
    sched, spans = [], {}
    _schedule(g.program.body, None, sched, spans)
    defs, last = {}, {}
    for i, (op, _) in enumerate(sched):
        if op is None:
            continue
        if hasattr(op, "out"):
            defs[op.out.id] = i
        if isinstance(op, ir.Loop):
            for a in op.args:
                defs[a.id] = i
            for o in op.outs:
                defs[o.id] = spans[id(op)][1]
    for i, (op, _) in enumerate(sched):
        for v in (operands(op) if op is not None else []):
            j = i
            lp = g.loop_of.get(id(op))
            while lp is not None and defs.get(v.id, -1) < spans[id(lp)][0]:     # defined outside lp
                j = max(j, spans[id(lp)][1])
                lp = g.loop_of.get(id(lp))
            last[v.id] = max(last.get(v.id, -1), j)
    for op, _ in sched:
        if isinstance(op, ir.Loop):
            for y in op.yields:
                if isinstance(y, ir.Value) and y.id in defs and defs[y.id] > spans[id(op)][0]:
                    last[y.id] = max(last.get(y.id, -1), spans[id(op)][1])
    return sched, {v: (d, last.get(v, d)) for v, d in defs.items()}, spans


def _operand_fragments(d: ir.Dot, kind: str, wm: int, wn: int, lay: dict) -> int:
    """Registers of an mma.sync dot's operands read from shared memory while it multiplies: one
    16-wide K slice of A (4 per 16 rows a warp owns) and of B (2 per 8 columns) at a time."""
    if kind != "v2":
        return 0
    m, n = d.out.shape
    regs = 0
    for v, per_block in ((d.a, _ceil(m, MMA_ROWS * wm) * 4), (d.b, _ceil(n, MMA_COLS * wn) * 2)):
        if lay.get(v.id, BLOCKED_LAYOUT)[0] != OPERAND:
            regs += per_block * ir.DTYPE_BYTES[v.dtype] // 2
    return regs


def _in_flight(g: _Graph, dots: dict, lay: dict, regs: dict, sched, spans) -> list:
    """(first, last, registers) of the register A operands of wgmma dots left in flight across a
    pipelined loop's back edge (Triton waits for a dot whose accumulator is carried only at the
    next iteration's first dot): live from the loop's top to that first dot."""
    out = []
    for i, (op, loop) in enumerate(sched):
        if (not isinstance(op, ir.Dot) or loop is None or loop.stages < 2 or dots[id(op)][0] != "v3"
                or lay.get(op.a.id, BLOCKED_LAYOUT)[0] != OPERAND or not _carried(op, loop, g)):
            continue
        first, _ = spans[id(loop)]
        nxt = next((j for j in range(first, i) if isinstance(sched[j][0], ir.Dot)), i)
        out.append((first, nxt, regs.get(op.a.id, 0)))
    return out


def _carried(d: ir.Dot, loop: ir.Loop, g: _Graph) -> bool:
    """Whether the dot accumulates into a loop-carried value (directly or rescaled)."""
    args = {a.id for a in loop.args}
    v = d.acc
    while v is not None and v.id not in args:
        src = g.producer.get(v.id)
        v = next((x for x in operands(src) if len(x.shape) == len(d.out.shape) and x.shape == d.out.shape), None) \
            if isinstance(src, (ir.Binary, ir.Unary, ir.Cast)) else None
    return v is not None


def _staged_loads(g: _Graph, lay: dict, sched, spans) -> list:
    """(first, last, registers) of loaded dot operands that pass through registers on their way to
    shared memory (no cp.async): in a loop that is not pipelined from the loop's top (where ptxas
    issues the loads) to the dot, elsewhere only at the load. ptxas copies such a tile in 16-byte
    pieces, so one register per 16-byte vector stays live (counting the whole tile overestimates
    ptxas by tens of registers on the recorded table)."""
    threads = 32 * g.program.num_warps
    out = []
    for i, (op, loop) in enumerate(sched):
        if not isinstance(op, ir.Load) or lay.get(op.out.id) != (SMEM,):
            continue
        regs = _vectors(op.out, threads)
        if loop is not None and loop.stages < 2:
            uses = [j for j, (o, _) in enumerate(sched) if isinstance(o, ir.Dot) and _reads(g, o, op.out)]
            out.append((spans[id(loop)][0], max(uses, default=i), regs))
        elif loop is None:
            out.append((i, i, regs))
    return out


def _reads(g: _Graph, dot: ir.Dot, v: ir.Value) -> bool:
    """Whether the dot reads ``v`` (directly or through views)."""
    for x in (dot.a, dot.b):
        while x.id != v.id and isinstance(g.producer.get(x.id), (ir.Trans, ir.ExpandDims)):
            x = g.producer[x.id].a
        if x.id == v.id:
            return True
    return False


def _value_regs(g: _Graph, dots: dict, lay: dict) -> dict:
    """{value id: registers per thread} of every value the program defines."""
    threads = 32 * g.program.num_warps
    regs, static, flow = {}, static_elements(g), streamed(g)
    for op in ir.walk(g.program.body):
        vals = ([op.out] if hasattr(op, "out") else []) + (list(op.args) + list(op.outs) if isinstance(op, ir.Loop) else [])
        for v in vals:
            regs[v.id] = value_regs(v, lay.get(v.id, BLOCKED_LAYOUT), dots, threads, static.get(v.id))
            if v.id in flow and not (isinstance(op, ir.Load) and _unpipelined(g, op)):
                # streamed: only a loaded tile's 16-byte vectors in flight remain
                regs[v.id] = _vectors(v, threads) if isinstance(op, ir.Load) else 0
    for v in index_values(g):
        regs[v] = min(regs.get(v, 0), 1)
    return regs


def _unpipelined(g: _Graph, op) -> bool:
    """Whether ``op`` is in a loop Triton does not pipeline (stages < 2): its loads are plain global
    loads, and ptxas issues all of a tile's loads before the first use, so a loaded tile that flows
    into an accumulator is held whole there (decode's combine: acc + o_s * w holds o_s), not
    streamed."""
    lp = g.loop_of.get(id(op))
    return lp is not None and lp.stages < 2


ELEMENTWISE_TEMPS = True       # per-element temporaries (_fuse_elementwise); off: every tile held whole


def _fuse_elementwise(g: _Graph, lay: dict, sched, ranges: dict, regs: dict) -> None:
    """Per-element temporaries: a tile computed by an elementwise op and used only by elementwise
    ops of the same shape and layout in the same loop body (not carried), with only elementwise
    ops between its definition and its last use, is never held whole: ptxas computes the chain
    element by element, so the tile costs no registers, and the tiles it is computed from stay
    live (element by element) until the chain's last op that reads it. A tile used again after a
    reduction of it (rmsnorm's one-tile t: t * t is summed, then t * rstd) is held."""
    pos = {id(op): i for i, (op, _) in enumerate(sched) if op is not None}
    carried = {y.id for lp in ir.walk(g.program.body) if isinstance(lp, ir.Loop)
               for y in lp.yields if isinstance(y, ir.Value)}
    temps = {}
    ops = [o for o in ir.walk(g.program.body) if isinstance(o, ELEMENTWISE)]
    for op in reversed(ops):
        v = op.out
        users = g.users.get(v.id, [])
        if (v.id in carried or not users or len(v.shape) == 0 or not regs.get(v.id)
                or any(not isinstance(u, ELEMENTWISE) or u.out.shape != v.shape
                       or lay.get(u.out.id, BLOCKED_LAYOUT) != lay.get(v.id, BLOCKED_LAYOUT)
                       or g.loop_of.get(id(u)) is not g.loop_of.get(id(op)) for u in users)):
            continue
        last = max(pos[id(u)] for u in users)
        if any(o is not None and not isinstance(o, ELEMENTWISE + (ir.Iota, ir.Full, ir.ExpandDims))
               for o, _ in sched[pos[id(op)] + 1:last]):
            continue        # used again after a reduction (rmsnorm's t * t, then t * rstd): held
        temps[v.id] = max(temps.get(u.out.id, pos[id(u)]) for u in users)
    for op in ops:
        if op.out.id not in temps:
            continue
        end = temps[op.out.id]
        regs[op.out.id] = 0
        for x in operands(op):
            if x.id in temps or x.shape != op.out.shape or x.id not in ranges:
                continue
            d, e = ranges[x.id]
            ranges[x.id] = (d, max(e, end))


def peak_live(g: _Graph, dots: dict, lay: dict) -> tuple:
    """(largest registers live at once, index of that op in the schedule)."""
    sched, ranges, spans = _live_ranges(g)
    regs = _value_regs(g, dots, lay)
    if ELEMENTWISE_TEMPS:
        _fuse_elementwise(g, lay, sched, ranges, regs)
    through = [0] * (len(sched) + 1)          # values live across each op (defined before, used after)
    for v, (d, e) in ranges.items():
        if e > d + 1 and regs.get(v, 0):
            through[d + 1] += regs[v]
            through[e] -= regs[v]
    for i in range(1, len(through)):
        through[i] += through[i - 1]
    extra = [0] * len(sched)                  # tiles held outside the values: staged and in flight
    for a, b, r in _staged_loads(g, lay, sched, spans) + _in_flight(g, dots, lay, regs, sched, spans):
        for i in range(a, b + 1):
            extra[i] += r
    best = (0, 0)
    for i, (op, _) in enumerate(sched):
        if op is None:
            continue
        dying = sum(regs.get(v.id, 0) for v in operands(op) if ranges.get(v.id, (0, 0))[1] == i)
        new = regs.get(op.out.id, 0) if hasattr(op, "out") else 0
        frags = _operand_fragments(op, *dots[id(op)], lay) if isinstance(op, ir.Dot) else 0
        best = max(best, (through[i] + max(dying, new) + extra[i] + frags, i))
    return best


def _vectors(v, threads: int) -> int:
    return max(1, _ceil(v.numel * ir.DTYPE_BYTES[v.dtype], 16 * threads))


def features(program: ir.Program, arch: int = 90) -> tuple:
    """(kind, {term: registers per thread}): kind ``v3``/``v2`` (the program's dots use wgmma /
    mma.sync) or ``simt`` (no dot); terms ``live`` (the most registers the program's values hold at
    once) and ``addresses`` (16-byte vectors loaded per loop iteration)."""
    g = _Graph(program)
    dots = dot_layouts(g, arch)
    lay = value_layouts(g, dots)
    threads = 32 * program.num_warps
    in_loop = [o for lp in ir.walk(program.body) if isinstance(lp, ir.Loop) for o in ir.walk(lp.body)]
    addresses = sum(_vectors(o.out, threads) for o in in_loop if isinstance(o, ir.Load))
    live, _ = peak_live(g, dots, lay)
    kinds = {k for k, _, _ in dots.values()}
    kind = "simt" if not kinds or kinds == {"fma"} else ("v3" if kinds == {"v3"} else "v2")
    if kind == "simt" and any(isinstance(o, ir.Reduce) for o in ir.walk(program.body)):
        kind = "reduce"
    return kind, {"live": live, "addresses": addresses if kind in ("v3", "v2") else 0}


def estimate(program: ir.Program, arch: int = 90) -> int:
    """Registers per thread (uncapped: above 255 means ptxas will spill)."""
    kind, f = features(program, arch)
    return int(round(COEF[kind]["base"] + sum(f.values())))
