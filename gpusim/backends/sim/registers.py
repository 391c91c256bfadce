"""Analytic estimate of registers per thread of a program's Triton kernel (the fallback when the
real compiler is not at hand; ``backends/triton/compile.py`` reads the real count).

The estimate follows how Triton lays tiles out over threads (TritonGPU's AccelerateMatmul pass):

* A ``dot`` uses the tensor cores. On sm_90 with num_warps a multiple of 4 and 64 | M it is a
  warpgroup MMA (wgmma, "v3"): both operands come from shared memory unless one is computed in
  registers (flash's P); otherwise ("v2", mma.sync) both operands are loaded into registers.
* An MMA result tile is spread over (wm, wn) warps, each warp holding 16x8 blocks, 4 fp32 values
  per thread per block; a tile smaller than the warps' coverage is replicated. Dots chained
  through their results (flash's S -> P -> PV) put all warps along M when M has room (16 rows
  per warp), as Triton does so the row reductions stay inside a warp.
* A row vector of an MMA tile (the online-softmax max and sum) costs 2 registers per 16 rows a
  warp owns; a 16-bit A operand 4 registers per 16x16 block.
* Every load inside the loop keeps an address per 16-byte vector a thread moves.
* Programs without a dot (elementwise, softmax rows) hold their largest tile in a blocked layout.

Live at once inside the main loop: the loop-carried tiles, each dot's fresh result, the operands
held in registers, the row vectors, one register per 16-byte vector loaded per iteration (its
address), plus a fixed base per kernel kind fitted to ptxas. docs/resources.md compares the
estimate with the compiled counts (tests/data/compiled_resources_sm90.json, and the H200's).
"""
from __future__ import annotations

from ...dsl import ir

# Each term counts at one register per register it describes; what is fitted is the base: registers
# a kernel needs beyond its tiles (program ids, loop counter, base pointers, masks, ptxas's
# temporaries), the median residual over the recorded sm_90 table (docs/resources.md), by kernel kind.
# A dot-free kernel's addresses cost nothing extra (ptxas derives them from one base: residual 0).
COEF = {"v3": {"base": 26, "addresses": 1.0}, "v2": {"base": 12, "addresses": 1.0},
        "simt": {"base": 10, "addresses": 0.0}}


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
    """(warps along M, warps along N) of an MMA result tile, as Triton's warpsPerTile picks them."""
    if chained and m >= 16 * num_warps:
        return num_warps, 1
    if kind == "v3":
        wm, wn = 4, 1
        while wm * wn < num_warps:
            if m > 16 * wm:
                wm *= 2
            else:
                wn *= 2
        return wm, wn
    wm, wn = 1, 1
    while wm * wn < num_warps:
        if m // 16 // wm >= n // 16 // wn and wm < m // 16:
            wm *= 2
        else:
            wn *= 2
    return wm, wn


def mma_tile_regs(m: int, n: int, wm: int, wn: int) -> int:
    """fp32 registers per thread of an m x n MMA result over wm x wn warps (16x8 per warp per block)."""
    return _ceil(m, 16 * wm) * _ceil(n, 8 * wn) * 4


def _producers(program: ir.Program) -> dict:
    return {o.out.id: o for o in ir.walk(program.body) if hasattr(o, "out")}


def _reaches_dot(v, producers: dict, seen: set) -> bool:
    """Whether value ``v`` is computed (through any ops) from a dot's result."""
    if not isinstance(v, ir.Value) or v.id in seen:
        return False
    seen.add(v.id)
    op = producers.get(v.id)
    if op is None:
        return False
    if isinstance(op, ir.Dot):
        return True
    return any(_reaches_dot(getattr(op, f), producers, seen) for f in op.__dataclass_fields__ if f != "out")


def _vectors(v, threads: int) -> int:
    return max(1, _ceil(v.numel * ir.DTYPE_BYTES[v.dtype], 16 * threads))


def features(program: ir.Program, arch: int = 90) -> tuple:
    """(kind, {term: registers per thread}) of the tiles live in the program's main loop.

    kind is ``v3``/``v2`` (the program's dots use wgmma / mma.sync) or ``simt`` (no dot). Terms:
    ``acc`` loop-carried MMA results, ``fresh`` MMA results made in the loop (flash's S),
    ``a_computed`` A operands computed in registers (flash's P), ``a_loaded`` loop-invariant loaded A
    operands that mma.sync holds in registers across the loop (flash's Q), ``operands`` the
    loaded operand fragments mma.sync holds while it multiplies (matmul's A and B), ``rows`` row vectors carried across the loop,
    ``addresses`` 16-byte vectors loaded per iteration, ``tile`` a dot-free program's largest tile."""
    w = program.num_warps
    threads = 32 * w
    ops = list(ir.walk(program.body))
    dots = [o for o in ops if isinstance(o, ir.Dot)]
    loops = [o for o in ops if isinstance(o, ir.Loop)]
    in_loop = [o for lp in loops for o in ir.walk(lp.body)]
    addresses = sum(_vectors(o.out, threads) for o in in_loop if isinstance(o, ir.Load))
    if not dots:
        big = max((o.out for o in ops if hasattr(o, "out")), key=lambda v: v.numel * ir.DTYPE_BYTES[v.dtype],
                  default=None)
        tile = _ceil(big.numel * ir.DTYPE_BYTES[big.dtype], 4 * threads) if big is not None else 0
        return "simt", {"tile": tile, "addresses": addresses}
    producers = _producers(program)
    chained = any(_reaches_dot(d.a, producers, set()) or _reaches_dot(d.b, producers, set()) for d in dots)
    kinds = [dot_kind(d, w, arch) for d in dots]
    layout0 = warps_per_tile(*dots[0].out.shape, w, kinds[0], chained)
    loaded = {o.out.id for o in ops if isinstance(o, ir.Load)}
    loop_defined = {o.out.id for o in in_loop if hasattr(o, "out")}
    alias = {}
    for o in ops:
        if isinstance(o, (ir.Trans, ir.ExpandDims)):
            alias[o.out.id] = alias.get(o.a.id, o.a.id)
    f = {"acc": 0, "fresh": 0, "a_computed": 0, "a_loaded": 0, "operands": 0, "rows": 0, "addresses": addresses}
    for d, kind in zip(dots, kinds):
        m, n = d.out.shape
        wm, wn = layout0 if chained else warps_per_tile(m, n, w, kind, chained)
        f["acc" if d.acc is not None else "fresh"] += mma_tile_regs(m, n, wm, wn)
        a_regs = _ceil(m, 16 * wm) * _ceil(d.a.shape[1], 16) * 4 * ir.DTYPE_BYTES[d.a.dtype] // 2
        a = alias.get(d.a.id, d.a.id)
        mb, nb = _ceil(m, 16 * wm), _ceil(n, 8 * wn)
        if a not in loaded:
            f["a_computed"] += a_regs
        elif kind != "v3" and a not in loop_defined and d.out.id in loop_defined:
            f["a_loaded"] += a_regs     # loop-invariant operand: mma.sync keeps its fragments (hoisted)
        elif kind != "v3" and nb > 1:
            # mma.sync reuses A fragments across its N blocks; ptxas streams them along K, keeping
            # about two 16-wide K slices in flight
            f["operands"] += a_regs * min(2, _ceil(d.a.shape[1], 16)) // _ceil(d.a.shape[1], 16)
        if kind != "v3" and alias.get(d.b.id, d.b.id) in loaded and mb > 1:
            # B fragments (2 regs per 16x8 of 16-bit values), reused across the warp's M blocks
            f["operands"] += nb * min(2, _ceil(d.a.shape[1], 16)) * 2 * ir.DTYPE_BYTES[d.b.dtype] // 2
    rows = sum(1 for lp in loops for a in lp.args if len(a.shape) == 1)
    f["rows"] = rows * _ceil(dots[0].out.shape[0], 16 * layout0[0]) * 2
    return ("v3" if all(k == "v3" for k in kinds) else "v2"), f


def estimate(program: ir.Program, arch: int = 90) -> int:
    """Registers per thread (uncapped: above 255 means ptxas will spill)."""
    kind, f = features(program, arch)
    c = COEF[kind]
    return int(round(c["base"] + sum(c.get(k, 1.0) * v for k, v in f.items())))
