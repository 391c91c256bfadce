"""What the compiler decides below the tile, as pure cost functions: global-access vector width and
register spill traffic. The engine charges what these return; the numbers come from the config
(measured by ``benchmarks/micro_fidelity.py`` on the H200) and from the compiled kernel
(``gpusim.backends.triton.compile``) or, without triton, an analytic estimate.

Vector width. Triton vectorises a global access only as wide as it can prove aligned: the base
pointer is 16-byte aligned, shapes are compile-time constants in gpusim's generated code, so a
tile row can be read in ``v``-element vectors where ``v`` is the largest power of two dividing
the row pitch (for tensors with rows) and the row length when the last tile of a row is masked,
capped at 16 bytes. A narrower access moves the same bytes in more instructions: the SM's
load/store path then sustains ``scalar_access_per_clk_per_sm[element bytes] * v`` elements per
clock (measured at ``v = 1`` with a streaming copy at sizes that are not multiples of 16).

Spills. A thread that needs more than 255 registers keeps the rest in local memory. Every loop
iteration then stores and reloads them (STL/LDL in the loop body). The microbenchmark with 256
and 512 live fp32 values per thread runs at the L2's bandwidth for those bytes, so spill traffic
is charged to the shared L2 channel and the SM's port, per iteration, before the iteration's work.

Tensor duplication and unrolling. The compiled loop body's MMA shapes give the tensor FLOPs the
loop really issues (more than the tiles hold when two warpgroups each compute a whole dot, see
``tensor_duplication``); its global-load bytes against the tile program's give how many iterations
ptxas unrolled into one body (``unroll_factor``), by which every per-iteration count is divided.
"""
from __future__ import annotations

import math
from collections import Counter

from ...dsl import ir
from ...hardware import GPUConfig

VECTOR_BYTES = 16      # widest global access per thread (LDG.E.128 / cp.async 16 B)
REGISTER_BYTES = 4


def pow2_divisor(n: int) -> int:
    """Largest power of two dividing ``n`` (``n`` > 0)."""
    n = int(n)
    return n & -n if n > 0 else 1


def vector_width(tensor: ir.TensorArg, tile_shape: tuple) -> int:
    """Elements per global access for a tile of ``tile_shape`` read from or written to ``tensor``."""
    es = ir.DTYPE_BYTES[tensor.dtype]
    full = max(1, VECTOR_BYTES // es)
    last = int(tensor.shape[-1])
    cols = int(tile_shape[-1])
    v = full
    if len(tensor.shape) > 1 and tensor.nbytes // es != last:
        v = min(v, pow2_divisor(last))            # every row must start on a v-element boundary
    if last % cols:
        v = min(v, pow2_divisor(last))            # the masked last tile of a row
    return max(1, min(v, cols))


def copies_async(tensor: ir.TensorArg, tile_shape: tuple, cfg: GPUConfig) -> bool:
    """Whether Triton stages a ``tile_shape`` tile of ``tensor`` into shared memory with cp.async
    (LDGSTS). cp.async moves 4, 8 or 16 bytes per thread (``cfg.cp_async_min_bytes``); where Triton
    can prove the rows aligned only to 2 bytes (an odd fp16 pitch) it loads the tile into registers
    (2-byte LDG) and stores it to shared memory (STS), and its pipeliner does not run that load
    ahead: ``stream_pad`` (pad 1) takes the same time at 2 and 3 stages, and its SASS has LDG + STS
    where pad 2 has LDGSTS."""
    return vector_width(tensor, tile_shape) * ir.DTYPE_BYTES[tensor.dtype] >= cfg.cp_async_min_bytes


def one_stage_serial(loop) -> tuple | None:
    """At ``num_stages`` 1 Triton does not copy with cp.async: each tile that feeds a dot is loaded
    into registers (LDG), stored to shared memory (STS), fenced (MEMBAR) and barriered before the
    dot reads it, in program order. A staged tile whose load follows a dot in the loop body (flash's
    V after ``Q K^T``) is therefore requested only after the tiles before that dot have arrived and
    been stored: its round trip starts when theirs ends, overlapping only the dot in between. The
    SASS of flash's loop at one stage: LDG K, STS K, MEMBAR, BAR, HGMMA (with V's LDGs among
    them), STS V, MEMBAR, BAR, HGMMA; at two stages every LDGSTS is issued together. Measured on its
    own by benchmarks/kernels/chain_dot_stages.yaml (micro/val_chain_dot_stages: one stage 1.3-2.1x
    the time of two). Returns (idx of the staged loads before the first dot, idx of those after it),
    or None when the loop has no staged load after a dot (a GEMM's A and B feed one dot)."""
    first = tuple(ld.idx for ld in loop.loads if ld.sram and not ld.after_dot)
    later = tuple(ld.idx for ld in loop.loads if ld.sram and ld.after_dot)
    return (first, later) if first and later else None


def staging_class(tensor: ir.TensorArg, tile_shape: tuple, width: int, line_bytes: int = 128) -> str | None:
    """How a ``tile_shape`` tile staged into shared memory from ``tensor`` at ``width`` elements per
    access departs from aligned 16-byte copies of whole L2 lines: "8", "4" or "2" (the access bytes
    Triton can prove aligned; an odd pitch goes through 2-byte loads), "line" (16-byte accesses to
    part of each row, rows not a multiple of ``line_bytes`` apart, so most rows straddle an extra
    line; a tile of whole rows is one contiguous block), or None (aligned)."""
    es = ir.DTYPE_BYTES[tensor.dtype]
    wb = width * es
    if wb < VECTOR_BYTES:
        return "8" if wb >= 8 else "4" if wb >= 4 else "2"
    last = int(tensor.shape[-1])
    if len(tensor.shape) > 1 and (last * es) % line_bytes and int(tile_shape[-1]) < last:
        return "line"
    return None


def staging_cost(tensor: ir.TensorArg, tile_shape: tuple, width: int, cfg: GPUConfig) -> float:
    """Times its aligned cost a staged tile from ``tensor`` takes (``GPUConfig.staged_access_cost``)."""
    c = staging_class(tensor, tile_shape, width, cfg.l2_line_bytes)
    return cfg.staged_access_cost.get(c, 1.0) if c else 1.0


def hbm_piece_cost(piece_bytes: float, cfg: GPUConfig) -> float:
    """Times its streaming cost a DRAM read takes when the tile's rows give it contiguous pieces of
    ``piece_bytes`` (``GPUConfig.hbm_piece_efficiency``): 1 / the measured fraction, interpolated in
    log2 of the piece between the measured sizes; 1 past the largest (and with no table). Below
    the smallest measured piece, that piece's fraction (a 32-byte sector is the L2's fetch unit)."""
    table = cfg.hbm_piece_efficiency
    if not table or piece_bytes <= 0 or piece_bytes > max(table):
        return 1.0
    return 1.0 / min(1.0, _log2_lerp(table, piece_bytes))


def request_latency(table: dict, lines: float) -> float:
    """Extra cycles of a tile's round trip over one request's latency when it asks for ``lines``
    L2 lines at once (``GPUConfig.request_latency_cycles["miss"]`` or ``["hit"]``): linear between
    the measured line counts (from 0 extra at one line), the last slope past the largest; 0 with
    no table."""
    if not table or lines <= 1:
        return 0.0
    pts = sorted(table.items())
    if pts[0][0] > 1:
        pts.insert(0, (1, 0.0))
    for (n0, x0), (n1, x1) in zip(pts, pts[1:]):
        if lines <= n1:
            return x0 + (x1 - x0) * (lines - n0) / (n1 - n0)
    if len(pts) == 1:
        return pts[0][1]
    (n0, x0), (n1, x1) = pts[-2], pts[-1]
    return x1 + (x1 - x0) * (lines - n1) / (n1 - n0)


def _log2_lerp(curve: dict, x: float) -> float:
    """``curve`` (key -> value) at ``x``, linear in log2 of the key between keys; the end values
    outside them."""
    keys = sorted(curve)
    if x <= keys[0]:
        return curve[keys[0]]
    for lo, hi in zip(keys, keys[1:]):
        if x <= hi:
            w = (math.log2(x) - math.log2(lo)) / (math.log2(hi) - math.log2(lo))
            return curve[lo] + w * (curve[hi] - curve[lo])
    return curve[keys[-1]]


def coalesced_fraction(table: dict, ctas_per_sm: float, tile_bytes: float, sharers: float) -> float:
    """The fraction of the sectors that ``sharers`` requests for the same tile at once (CTAs on
    different SMs in phase, ``tile_bytes`` each) make the L2 slices read, the rest merged on the way
    by the L2 request coalescer (``GPUConfig.l2_coalesced_fraction``): linear in log2 of the CTAs
    resident per SM, of the tile bytes and of the sharers between the measured ones, the end values
    past them. 1 with no table or one request."""
    if not table or sharers <= 1:
        return 1.0
    return _log2_lerp({c: _log2_lerp({tb: _log2_lerp(curve, sharers) for tb, curve in by_tile.items()}, tile_bytes)
                       for c, by_tile in table.items()}, ctas_per_sm)


def merged_share(table: dict, ctas_per_sm: int, tile_bytes: float, n: int) -> float:
    """The share of its bytes the ``n``-th of a run of simultaneous requests for one tile makes the
    L2 slices read: what the run of n costs in all less what the first n - 1 cost
    (``coalesced_fraction``), within [0, 1]."""
    if n <= 1:
        return 1.0
    f = coalesced_fraction
    m = n * f(table, ctas_per_sm, tile_bytes, n) - (n - 1) * f(table, ctas_per_sm, tile_bytes, n - 1)
    return min(1.0, max(0.0, m))


def port_width(tensor: ir.TensorArg, tile_shape: tuple) -> int:
    """The access width whose cost a register tile's load or store pays on the SM's load/store path.

    Where the narrowness comes from the rows' pitch (a tensor with rows whose length is not a
    multiple of 16 bytes), Triton cannot prove the row starts aligned and lays the tile out with
    consecutive lanes on consecutive elements: each warp access covers 32 x element bytes in one or
    two lines, the bytes cost what they cost aligned, only in more instructions (which the compiled
    loop's issue counts). Where only the mask is narrow (a 1-D tensor whose length is not a multiple
    of 16 bytes, the pointer aligned), Triton keeps the 16-byte-per-thread layout and splits each
    thread's vector into element-wide accesses: every warp access then touches the sixteen sectors
    of 512 bytes for 64 or 128 bytes of data, and the stores reach the L2 as partial sectors. ncu
    on the H200 (data/h200/micro/ncu_probe_round7b.json): the fused elementwise kernel at
    an odd length, 16 L1 sectors per global load request and 5.7 times the data's sectors written to
    the L2; a softmax over 9999-element rows, 2.9 sectors per request. So the measured narrow rate
    (``scalar_access_per_clk_per_sm``, from such a copy) applies to the mask-limited case only."""
    width = vector_width(tensor, tile_shape)
    es = ir.DTYPE_BYTES[tensor.dtype]
    if len(tensor.shape) > 1 and tensor.nbytes // es != int(tensor.shape[-1]) \
            and pow2_divisor(int(tensor.shape[-1])) * es < VECTOR_BYTES:
        return max(width, min(VECTOR_BYTES // es, int(tile_shape[-1])))
    return width


def store_port_bytes(tensor: ir.TensorArg, tile_shape: tuple, nbytes: float, cfg: GPUConfig) -> float:
    """Bytes-equivalent time a register tile's store holds the SM's load/store path. The narrow
    rate was measured with a copy (one load and one store per element); ncu shows its loads' repeated
    sectors hitting in the L1 (70% hit rate, exactly the data's sectors missing) and its stores reaching
    the L2 as 5.7 times the data's sectors, the warps stalled on the load/store queues. So the
    copy's whole time is the stores': two of its element accesses per stored element, and a narrow
    load costs its bytes."""
    es = ir.DTYPE_BYTES[tensor.dtype]
    return port_bytes(nbytes, 2.0 * nbytes / es, es, port_width(tensor, tile_shape), cfg)


def port_bytes(nbytes: float, elements: float, es: int, width: int, cfg: GPUConfig) -> float:
    """Bytes-equivalent time a tile access holds the SM's load/store port: its bytes, or, for an
    access narrower than a full vector, the element rate the config measured for that width."""
    rate = cfg.scalar_access_per_clk_per_sm.get(es) if width * es < VECTOR_BYTES else None
    if not rate:
        return nbytes
    cycles = elements / (rate * width)
    return max(nbytes, cycles * cfg.sm_load_bytes_per_clk)


def spill_bytes_per_iteration(program: ir.Program, compiled=None, estimated_registers: int | None = None,
                              max_registers: int = 255) -> float:
    """Local-memory bytes (stores + reloads) one CTA moves per iteration of its loop.

    From the compiled kernel: the STL and LDL bytes inside its loops. Without it: every register
    beyond ``max_registers`` is stored and reloaded once per iteration."""
    threads = 32 * program.num_warps
    if compiled is not None:
        per_thread = getattr(compiled, "loop_spill_bytes", None)
        if per_thread is None:
            per_thread = compiled.spill_store_bytes + compiled.spill_load_bytes
        return float(per_thread) * threads
    if estimated_registers is None:
        return 0.0
    excess = max(0, estimated_registers - max_registers)
    return 2.0 * REGISTER_BYTES * excess * threads


TENSOR_OPCODES = ("HGMMA", "HMMA", "WARPGROUP")   # run on the tensor pipe (costed from FLOPs)
SFU_OPCODES = ("MUFU",)


def loop_issue_cycles(compiled, num_warps: int, cfg: GPUConfig, mix: dict | None = None) -> tuple | None:
    """(issue cycles, SFU cycles) one CTA's loop iteration puts on its SM, from the compiled loop
    body's instruction mix (``mix``: one body's, see ``body_mixes``; default the kernel's loops
    together): every non-tensor instruction takes one issue slot per warp (an SM issues
    ``warp_issue_per_clk_per_sm`` warp-instructions per clock), and every MUFU instruction holds the
    special-function pipe for 32 lanes. None when the loop mix is unknown.

    This sees what the tile-level op list cannot: work the compiler duplicates across warps (a
    64-row tile on 8 warps computes its softmax in both warpgroups), layout conversions, index
    arithmetic and the reductions' shuffles."""
    if mix is None:
        mix = dict(getattr(compiled, "sass_loop", ()) or ())
    if not mix:
        return None
    issue = sfu = 0
    for op, n in mix.items():
        if "." in op or op.startswith(TENSOR_OPCODES):   # "MUFU.EX2" details repeat "MUFU"
            continue
        issue += n
        if op.startswith(SFU_OPCODES):
            sfu += n
    return (issue * num_warps / cfg.warp_issue_per_clk_per_sm,
            sfu * num_warps * 32 / cfg.sfu_ops_per_clk_per_sm)


def body_mixes(compiled, loops: int) -> list | None:
    """Per compiled loop body, in program order: {opcode: count} (``sass_loop`` split by loop), when
    the kernel has exactly ``loops`` bodies (one per loop of the tile program); else None.

    A streamed row kernel has two or three loops (softmax: the statistics pass, then the normalising
    pass); each costs its own body's instructions, not the kernel's loops together."""
    bodies = getattr(compiled, "loop_bodies", None)
    if not bodies or len(bodies) != loops:
        return None
    return [dict(Counter(ins.split("|", 1)[0].split(".", 1)[0] for ins in b)) for b in bodies]


def loop_spill_bytes_per_thread(compiled, ops: tuple = ("STL", "LDL"), mix: dict | None = None) -> float:
    """STL + LDL bytes per thread inside the compiled loop (``ops``: only those kinds; ``mix``: one
    loop body's opcode counts, default the kernel's loops together): the kernel's spill bytes times
    the share of its STL / LDL instructions that sit in the loop."""
    total = dict(compiled.sass)
    loop = dict(compiled.sass_loop) if mix is None else mix
    out = 0.0
    for op, nbytes in (("STL", compiled.spill_store_bytes), ("LDL", compiled.spill_load_bytes)):
        if op in ops and total.get(op):
            out += nbytes * loop.get(op, 0) / total[op]
    return out


def unroll_factor(compiled, program: ir.Program, loop_steps: list) -> int:
    """Iterations of the tile program's loops that one compiled loop body holds (ptxas unrolls
    small loop bodies, e.g. 4x for a 64x64x32 GEMM tile): the body's global-load bytes per thread
    over the loads the tile program issues per iteration. The SASS counts of the loop (issue, MUFU,
    spills, MMA FLOPs) are divided by it. 1 when unknown. A loop that loads nothing is measured by
    its arithmetic instead (``arithmetic_unroll``).

    A body that copies a tile more than once is not unrolled: triton 3.6 stages the backward's
    row vectors (LSE, delta) with 16 predicated 8-byte copies per thread, 192 load bytes per
    thread where the tiles hold 66. So where the loop has MMAs, the factor is at most the
    body's MMA FLOPs over the tiles' (each iteration issues its MMAs at least once)."""
    from .steps import TensorStep

    body = getattr(compiled, "loop_load_bytes", None)
    tensors = {t.name: t for t in program.params}
    per_iter = sum(math.prod(ld.shape) * ir.DTYPE_BYTES[tensors[ld.tensor].dtype]
                   for s in loop_steps for ld in s.loads if ld.tensor in tensors)
    if not per_iter:
        return arithmetic_unroll(compiled, program) if body is not None else 1
    if not body:
        return 1
    unroll = max(1, round(body * 32 * program.num_warps / per_iter))
    mma = getattr(compiled, "loop_mma_flops", None)
    tile = sum(b.flops for s in loop_steps for b in s.body if isinstance(b, TensorStep))
    if mma and tile:
        unroll = min(unroll, max(1, math.floor(mma * program.num_warps / tile + 1e-9)))
    return unroll


_COMPARES = ("lt", "le", "gt", "ge", "eq", "ne")


def arithmetic_unroll(compiled, program: ir.Program) -> int:
    """The unroll factor of loops that load nothing (a compute-only loop, as in
    benchmarks/kernels/spill_live.py): the compiled bodies' FP32-pipe instructions (FFMA, FADD,
    FMNMX, FSETP, FSEL...) per thread over the tile program's float elementwise ops per thread per
    iteration, a multiply-add counted once (``analysis.fma_contractions``), a tanh, sigmoid, erf, sin
    or cos as the FP32-pipe instructions of its SASS (``ir.MATH_UNARY``). ptxas unrolls such a
    loop of 1024 iterations over 16 values 17 times (272 FFMA in the body; its counter steps by 17).
    1 when the bodies are unknown or the loops do no float arithmetic."""
    from ...dsl import analysis
    from .warp import op_class

    bodies = getattr(compiled, "loop_bodies", None)
    if not bodies:
        return 1
    sass = sum(1 for b in bodies for ins in b if op_class(ins.split("|", 1)[0]) == "fp32")
    fused = analysis.fma_contractions(program)
    ops = 0
    for loop in (op for op in program.body if isinstance(op, ir.Loop)):
        for op in ir.walk(loop.body):
            if isinstance(op, ir.Unary) and op.op in ir.MATH_UNARY:     # its SASS's FP32-pipe ops
                ops += op.out.numel * ir.MATH_UNARY[op.op][1]
                continue
            if isinstance(op, ir.Unary) and op.op in ir.SFU_UNARY:
                continue
            if (isinstance(op, (ir.Binary, ir.Unary, ir.Where)) and op.out.id not in fused
                    and (op.out.dtype in ir.FLOAT_DTYPES or getattr(op, "op", None) in _COMPARES)):
                ops += op.out.numel
    per_thread = ops / (32 * program.num_warps)
    return max(1, round(sass / per_thread)) if per_thread else 1


def tensor_duplication(compiled, num_warps: int, loop_steps: list, unroll: int = 1) -> float:
    """How many times the compiled loops issue the tensor work of the tile program's loops (>= 1).

    Triton cannot split a 64-row dot over two warpgroups (a wgmma covers 64 rows), so with 8 warps on
    a 64-row tile the warpgroups split the columns; when that dot's result feeds another dot as
    its A operand from registers (flash's ``P V``, the backward's ``dS K``), each warpgroup needs
    whole rows and computes the first dot in full: the loop issues more MMA FLOPs than the tiles
    hold. Read from the compiled loop bodies' HGMMA/HMMA shapes (``loop_mma_flops``, per ``unroll``
    iterations); 1 when unknown."""
    from .steps import TensorStep

    per_warp = getattr(compiled, "loop_mma_flops", None)
    tile = sum(b.flops for s in loop_steps for b in s.body if isinstance(b, TensorStep))
    if not per_warp or not tile:
        return 1.0
    return max(1.0, per_warp * num_warps / unroll / tile)


def loop_latency_cycles(compiled, num_warps: int, cfg: GPUConfig) -> list | None:
    """Per compiled loop body: the cycles one iteration of the CTA's warps takes at least, when each
    instruction waits for the results it reads (``warp.iteration_cycles``, with ``ceil(num_warps / 4)``
    warps sharing each scheduler). None without the loop bodies or the config's latencies."""
    from . import warp

    bodies = getattr(compiled, "loop_bodies", None)
    if not bodies or not cfg.dependent_latency_cycles:
        return None
    return [warp.iteration_cycles(b, cfg.dependent_latency_cycles, _scoreboard_rates(cfg), num_warps,
                                  int(cfg.warp_issue_per_clk_per_sm)) for b in bodies]


def _scoreboard_rates(cfg: GPUConfig) -> dict:
    """The SM-wide throughput units the warp scoreboard shares among its schedulers."""
    return {"mufu": cfg.sfu_ops_per_clk_per_sm, "shfl": cfg.shuffle_lanes_per_clk_per_sm,
            "shared": cfg.shared_bytes_per_clk_per_sm}


def _simt_shares(loops: list) -> list:
    """Each loop's share of the loops' SIMT pipe time per iteration (equal shares when none has any)."""
    from .steps import SimtStep

    if not loops:
        return []
    t = [sum(max(b.vector_cycles, b.sfu_cycles) for b in s.body if isinstance(b, SimtStep)) for s in loops]
    tot = sum(t)
    return [x / tot for x in t] if tot else [1.0 / len(loops)] * len(loops)


def _scaled_body(body: tuple, dup, issue, unroll: int, latency: float = 0.0) -> tuple:
    """A loop body with its tensor steps scaled by ``dup`` (None: each step's analytic ``est_dup``),
    its SIMT steps raised to the compiled loop's issue and SFU cycles per iteration (never
    lowered), and ``latency`` (the compiled body's dependent-chain cycles) shared among its SIMT
    steps, in proportion to their pipe time, as the least time they take."""
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
    if latency <= 0 or not pipe:
        return body
    return tuple(replace(b, min_cycles=latency / unroll * max(b.vector_cycles, b.sfu_cycles) / pipe)
                 if isinstance(b, SimtStep) else b for b in body)


def adjust_loops(steps: tuple, program: ir.Program, occupancy, cfg: GPUConfig) -> tuple:
    """The step list with each loop's SIMT steps raised to its compiled body's issue and SFU
    cycles and given its dependent-chain cycles as their least time, its tensor steps scaled by the
    work the compiler duplicates across warpgroups, and its spill traffic set; the compiled loops'
    counts are per ``unroll_factor`` iterations. Each loop takes its own body's counts
    (``body_mixes``); when the bodies are unknown, the loops' summed counts are shared among them
    in proportion to their SIMT time."""
    from dataclasses import replace

    from .steps import LoopStep

    compiled = getattr(occupancy, "compiled", None)
    loops = [s for s in steps if isinstance(s, LoopStep)]
    latency = [0.0] * len(loops)
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
    else:
        from .cost import cta_resources

        unroll, dup = 1, None       # dup None: each tensor step's own estimate
        est = spill_bytes_per_iteration(program, None, cta_resources(program).registers_per_thread,
                                        cfg.max_registers_per_thread)
        issue = [None] * len(loops)
        spill = [est] * len(loops)
        spill_st = [est / 2.0] * len(loops)     # every register past the limit is stored and reloaded once
    k = iter(range(len(loops)))
    out = []
    for s in steps:
        if isinstance(s, LoopStep):
            i = next(k)
            s = replace(s, body=_scaled_body(s.body, dup, issue[i], unroll, latency[i]), spill_bytes=spill[i],
                        spill_store_bytes=spill_st[i])
        out.append(s)
    steps = tuple(out)
    return _straight_latency(steps, straight_cycles(compiled, program.num_warps, cfg))


def straight_cycles(compiled, num_warps: int, cfg: GPUConfig) -> float:
    """The cycles the compiled kernel's code outside its loops takes at least, each instruction
    waiting for the results it reads (``warp.pass_cycles``): a row kernel's single pass with its
    cross-warp reductions, a loop's prologue and epilogue. 0 without the compiled code or the
    config's latencies."""
    from . import warp

    body = getattr(compiled, "straight_body", None)
    if not body or not cfg.dependent_latency_cycles:
        return 0.0
    return warp.pass_cycles(body, cfg.dependent_latency_cycles, _scoreboard_rates(cfg), num_warps,
                            int(cfg.warp_issue_per_clk_per_sm))


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
