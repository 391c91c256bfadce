"""Analytic estimate of registers per thread of a program's Triton kernel (the fallback when the
real compiler is not at hand; ``toolchain/compile.py`` reads the real count).

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
   (decode's combine: a 16-row tile of 8 packed query rows holds 8 rows). These counts: ``tile_elements.py``.
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

Measured by: the compiled register counts of the recorded sm_90 table
(tests/data/compiled_resources_sm90.json); docs/resources.md gives the estimate against them.
"""
from __future__ import annotations

from ..dsl import ir
from .layouts import (BLOCKED_LAYOUT, MMA_COLS, MMA_ROWS, OPERAND, SMEM, blocked_split, ceil_div, Graph, dot_layouts,
                      index_values, operands, value_layouts, value_regs)
from .tile_elements import ELEMENTWISE, static_elements, stored_elements, streamed  # noqa: F401  (stored_elements: public here)

# The only fitted numbers: registers a kernel needs beyond its tiles (program ids, loop counters,
# base pointers, masks, ptxas's temporaries), one per kernel kind: wgmma kernels ("v3"), mma.sync
# kernels ("v2"), kernels without a dot ("simt") and those of them with a reduction ("reduce":
# its warp shuffles and cross-warp exchange). Each is the median of (compiled - counted) over the
# non-spilling launches of the development half of the recorded sm_90 table (configs whose
# crc32 of their params is even; ``record_resources.py --compare`` reports both halves).
COEF = {"v3": {"base": 25}, "v2": {"base": 25}, "simt": {"base": 10}, "reduce": {"base": 20}}


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


def _live_ranges(g: Graph) -> tuple:
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


# An FMA dot (fp32 operands, ``dtypes.dot_mode``): ptxas keeps part of each thread's A rows and B
# columns for the K steps in flight while its FFMAs run, about one register per 8 of the
# accumulator's rows per thread x K, plus a fixed 22. Fitted to 14 compiled fp32 GEMM tiles (16..128
# rows, 16..64 K, 1..8 warps; triton 3.9, sm_90; tests/compiler/test_fma_dot.py): within 8 registers
# on 10, 14-18 on two, 128x128x32 on 4 warps spilling as ptxas does; the 2-warp and 1-warp tiles
# need 16-36 more.
FMA_OPERAND = {"base": 22, "per_row_k": 1 / 8}


def _operand_fragments(d: ir.Dot, kind: str, wm: int, wn: int, lay: dict, num_warps: int = 4) -> int:
    """Registers of a dot's operands while it multiplies: for an mma.sync dot, the operands read
    from shared memory one 16-wide K slice of A (4 per 16 rows a warp owns) and of B (2 per 8
    columns) at a time; for an FMA dot, ``FMA_OPERAND``."""
    if kind == "fma":
        rows = blocked_split(d.out.shape, 4, num_warps)[0]
        return int(round(FMA_OPERAND["base"] + FMA_OPERAND["per_row_k"] * rows * d.a.shape[1]))
    if kind != "v2":
        return 0
    m, n = d.out.shape
    regs = 0
    for v, per_block in ((d.a, ceil_div(m, MMA_ROWS * wm) * 4), (d.b, ceil_div(n, MMA_COLS * wn) * 2)):
        if lay.get(v.id, BLOCKED_LAYOUT)[0] != OPERAND:
            regs += per_block * ir.DTYPE_BYTES[v.dtype] // 2
    return regs


def _in_flight(g: Graph, dots: dict, lay: dict, regs: dict, sched, spans) -> list:
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


def _carried(d: ir.Dot, loop: ir.Loop, g: Graph) -> bool:
    """Whether the dot accumulates into a loop-carried value (directly or rescaled)."""
    args = {a.id for a in loop.args}
    v = d.acc
    while v is not None and v.id not in args:
        src = g.producer.get(v.id)
        v = next((x for x in operands(src) if len(x.shape) == len(d.out.shape) and x.shape == d.out.shape), None) \
            if isinstance(src, (ir.Binary, ir.Unary, ir.Cast)) else None
    return v is not None


def _staged_loads(g: Graph, lay: dict, sched, spans) -> list:
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


def _reads(g: Graph, dot: ir.Dot, v: ir.Value) -> bool:
    """Whether the dot reads ``v`` (directly or through views)."""
    for x in (dot.a, dot.b):
        while x.id != v.id and isinstance(g.producer.get(x.id), (ir.Trans, ir.ExpandDims)):
            x = g.producer[x.id].a
        if x.id == v.id:
            return True
    return False


def _value_regs(g: Graph, dots: dict, lay: dict) -> dict:
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


def _unpipelined(g: Graph, op) -> bool:
    """Whether ``op`` is in a loop Triton does not pipeline (stages < 2): its loads are plain global
    loads, and ptxas issues all of a tile's loads before the first use, so a loaded tile that flows
    into an accumulator is held whole there (decode's combine: acc + o_s * w holds o_s), not
    streamed."""
    lp = g.loop_of.get(id(op))
    return lp is not None and lp.stages < 2


ELEMENTWISE_TEMPS = True       # per-element temporaries (_fuse_elementwise); off: every tile held whole


def _fuse_elementwise(g: Graph, lay: dict, sched, ranges: dict, regs: dict) -> None:
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


def peak_live(g: Graph, dots: dict, lay: dict) -> tuple:
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
        frags = _operand_fragments(op, *dots[id(op)], lay, g.program.num_warps) if isinstance(op, ir.Dot) else 0
        best = max(best, (through[i] + max(dying, new) + extra[i] + frags, i))
    return best


def _vectors(v, threads: int) -> int:
    return max(1, ceil_div(v.numel * ir.DTYPE_BYTES[v.dtype], 16 * threads))


def features(program: ir.Program, arch: int = 90) -> tuple:
    """(kind, {term: registers per thread}): kind ``v3``/``v2`` (the program's dots use wgmma /
    mma.sync) or ``simt`` (no dot); terms ``live`` (the most registers the program's values hold at
    once) and ``addresses`` (16-byte vectors loaded per loop iteration)."""
    g = Graph(program)
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
