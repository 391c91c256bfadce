"""Pure cost functions: cycles, bytes and FLOPs of one op, and the resources of one CTA, on one config.

Nothing here queues or waits; the engine (``engine.py``) does the contention. Each function is a
closed form that tests can check by hand.

Mechanisms costed here, each measured on the H200 (docs/model.md, "Across CTAs" and the ablation):
the tile efficiency of a dot (``GPUConfig.tensor_tile_efficiency``, a tile sweep; ablation off:
median / p90 |error| +0.6 / +31.7 points recorded, +2.2 / +22.8 held-out) and the SIMT rate of
each op class (``simt_lane_ops_per_clk_per_sm``, DSL microkernels from ``gpusim calibrate --ops``,
a multiply feeding an add fused as the compiler does, ``benchmarks/kernels/fma_rate.yaml``;
ablation off: +7.0 / +6.4 recorded, +6.7 / +5.2 held-out).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...dsl import analysis, ir
from ...compiler import ESTIMATE, CompilerView, registers, view_of
from ...compiler.layouts import Graph, blocked_split, dot_layouts, mma_issued, mma_kind, warps_per_tile
from ...compiler.sass_mix import MATH, fma_dot_issue
from ...dsl.dtypes import dot_mode
from ...hardware import GPUConfig

KIB = 1024


@dataclass(frozen=True)
class OpCost:
    """Work one op puts on the SM: tensor-pipe cycles, SIMT issue cycles, special-function cycles."""

    tensor_cycles: float = 0.0
    tensor_flops: float = 0.0
    simt_cycles: float = 0.0
    sfu_cycles: float = 0.0
    sfu_ops: float = 0.0


SIMT_CLASS = {"add": "add", "sub": "add", "mul": "mul", "div": "mul", "maximum": "maximum", "minimum": "maximum",
              "lt": "compare_where", "le": "compare_where", "gt": "compare_where", "ge": "compare_where",
              "eq": "compare_where", "ne": "compare_where", "and": "compare_where", "or": "compare_where",
              "neg": "add", "abs": "add", "not": "compare_where"}   # logical not: one predicate op


def simt_rate(cfg: GPUConfig, cls: str) -> float:
    """Lane-ops per clock per SM for an op class: measured if the config has it, else the FP32 rate."""
    return cfg.simt_lane_ops_per_clk_per_sm.get(cls, cfg.vector_ops_per_clk_per_sm)


def op_cost(op, cfg: GPUConfig, num_warps: int) -> OpCost:
    """Cost of one compute op (loads, stores and loops are handled by the engine).

    SIMT ops cost ``elements / rate(op class)`` issue cycles; special-function ops (exp2, log2,
    sqrt...) hold the SFU pipe for ``elements / sfu rate`` and take issue slots at the FP32 rate,
    so a step that mixes them lasts the longer of its issue time and its SFU time."""
    t = type(op)
    if t is ir.Dot:
        return dot_cost(op, cfg, num_warps)
    if t is ir.Unary:
        n = op.out.numel
        if op.op in MATH:
            return math_cost(op.op, n, cfg)
        return OpCost(simt_cycles=n / simt_rate(cfg, SIMT_CLASS[op.op]))
    if t is ir.Binary:
        if op.op == "div" and op.out.dtype in ir.FLOAT_DTYPES:   # fp32 div.full: MUFU.RCP and its correction
            return math_cost("div", op.out.numel, cfg)
        return OpCost(simt_cycles=op.out.numel / simt_rate(cfg, SIMT_CLASS[op.op]))
    if t is ir.Where:
        return OpCost(simt_cycles=op.out.numel / simt_rate(cfg, "compare_where"))
    if t is ir.Cast:
        if op.out.dtype in ("bool", "int32") or op.a.dtype == op.out.dtype:
            return OpCost(simt_cycles=op.out.numel / simt_rate(cfg, "add"))
        return OpCost(simt_cycles=op.out.numel / simt_rate(cfg, "cast"))
    if t is ir.Reduce:
        cls = "reduce_sum" if op.op == "sum" else "reduce_max"
        return OpCost(simt_cycles=op.a.numel / simt_rate(cfg, cls))
    if t in (ir.Full, ir.Iota):
        # materialised once per warp-register, mostly hoisted out of loops by the compiler
        return OpCost(simt_cycles=op.out.numel / 32.0 / cfg.vector_ops_per_clk_per_sm)
    return OpCost()   # ExpandDims, Trans: layout views, free


def math_cost(name: str, n: float, cfg: GPUConfig) -> OpCost:
    """``n`` elements of a math op as its SASS runs them (``compiler.sass_mix.MATH``, counted from
    Triton's sm_90 code): each MUFU instruction takes an issue slot at the FP32 rate and holds the
    special-function pipe; every other instruction issues at the measured multiply rate."""
    mix = MATH[name]
    issue = n * (mix["mufu"] / cfg.vector_ops_per_clk_per_sm + mix["issue"] / simt_rate(cfg, "mul"))
    return OpCost(simt_cycles=issue, sfu_cycles=mix["mufu"] * n / cfg.sfu_ops_per_clk_per_sm, sfu_ops=mix["mufu"] * n)


def dot_cost(op, cfg: GPUConfig, num_warps: int) -> OpCost:
    """A ``dot`` on the unit the lowering runs it on (``dtypes.dot_mode``, the one rule both use):
    fp16/bf16/fp8 operands on the tensor cores at the config's rate for that dtype and the tile's
    measured efficiency; fp32 (or mixed) operands, which the lowering emits with
    ``input_precision="ieee"``, as FFMAs on the FP32 pipe at its measured rate
    (``fp32_flops_per_s``: one FFMA per multiply-add), times the loop instructions per FFMA of
    Triton's FMA dot (the LDS that read its operands; ``sass_mix.FMA_DOT_ISSUE``)."""
    m, k = op.a.shape
    n = op.b.shape[1]
    flops = 2.0 * m * n * k
    dt, unit, _ = dot_mode(op.a.dtype, op.b.dtype)
    if unit == "fma":
        rows, cols = blocked_split((m, n), 4, num_warps)
        return OpCost(simt_cycles=m * n * k * fma_dot_issue(rows * cols) / cfg.vector_ops_per_clk_per_sm)
    # the efficiency table holds 16-bit tiles: an fp8 tile of depth k has the bytes and the MMA
    # instructions (k = 32 each) of a 16-bit tile of depth k / 2
    k_eff = max(1, k * ir.DTYPE_BYTES[dt] // 2)
    rate = cfg.tensor_flops_per_clk_per_sm(dt) * issued_efficiency(cfg, m, n, k_eff, num_warps)
    return OpCost(tensor_cycles=flops / rate, tensor_flops=flops)


def issued_efficiency(cfg: GPUConfig, m: int, n: int, k: int, num_warps: int) -> float:
    """The tensor pipe's efficiency on the MMA work a dot's warps issue. The nearest measured tile
    (``GPUConfig.tile_entry``) gives its tile's FLOPs over its time, with the MMA work its own warps
    repeated included (``mma_issued``: a 16 x 16 tile on 4 warps computes each 16 x 8 block twice,
    on other sub-partitions, in the same time). The step's FLOPs are scaled by the dot's own
    repeats (the compiled loop's, or ``mma_duplication``), so the repeats both share are counted
    once: the efficiency is the measured one times the fewer of the two (a 16 x 16 tile on 8 warps,
    4 repeats, costs twice the measured tile; on 2 warps, none, the same: one warp's dependent
    chain is no shorter)."""
    e = cfg.tile_entry(m, n, k, num_warps)
    if e is None:
        return 1.0
    arch = cfg.compute_capability or 0

    def repeats(mm, nn, warps):
        kind = mma_kind(mm, nn, warps, arch)
        rows, cols = mma_issued(kind, mm, nn, *warps_per_tile(mm, nn, warps, kind, False))
        return max(1.0, rows * cols / float(mm * nn))
    return e.efficiency * min(repeats(e.m, e.n, e.num_warps), repeats(m, n, num_warps))


def vector_flops(op) -> float:
    """Arithmetic FLOPs (not comparisons or data movement) of an elementwise/reduction op."""
    t = type(op)
    if t is ir.Dot and dot_mode(op.a.dtype, op.b.dtype)[1] == "fma":     # its FFMAs: 2 FLOPs each
        return 2.0 * op.a.shape[0] * op.a.shape[1] * op.b.shape[1]
    if t is ir.Binary and op.op in ("add", "sub", "mul", "div", "maximum", "minimum"):
        return float(op.out.numel)
    if t is ir.Unary and op.op not in ("neg", "not"):
        return float(op.out.numel)
    if t is ir.Reduce:
        return float(op.a.numel)
    return 0.0


# --------------------------------------------------------------------------- per-CTA resources
@dataclass
class CTAResources:
    sram_bytes: int
    registers_per_thread: int
    threads: int
    sram_detail: list = field(default_factory=list)


def cta_resources(program: ir.Program, arch: int = 90) -> CTAResources:
    """Shared memory: each tile that feeds a ``dot`` is staged in SRAM, ``stages`` copies inside a
    pipelined loop. Registers per thread: the analytic estimate of ``registers.estimate`` for
    compute capability ``arch`` (uncapped; docs/resources.md compares it with ptxas)."""
    shared = analysis.feeds_dot(program)
    sram, detail = 0, []

    def visit(ops, stages):
        nonlocal sram
        for op in ops:
            if isinstance(op, ir.Load) and op.out.id in shared:
                b = op.out.numel * ir.DTYPE_BYTES[op.out.dtype] * stages
                sram += b
                detail.append((op.tensor.name, op.out.shape, stages, b))
            if isinstance(op, ir.Loop):
                visit(op.body, max(1, op.stages))

    visit(program.body, 1)
    return CTAResources(sram, registers.estimate(program, arch), 32 * program.num_warps, detail)


@dataclass(frozen=True)
class Occupancy:
    ctas_per_sm: int
    limiter: str
    sram_bytes_per_cta: int
    registers_per_thread: int
    spills: bool
    resources: str = "estimated"     # where registers_per_thread came from: compiled | estimated
    compiled: object = None          # the CompiledResources when compiled (spill bytes, SASS mix)

    @property
    def compiler(self) -> str:
        """The identity of the compiler's view this launch was timed with (``compiler.view_name``)."""
        c = self.compiled
        return f"triton {c.triton_version}" if c is not None else ESTIMATE


class InfeasibleError(ValueError):
    """The launch cannot run on this GPU (a CTA needs more than the hardware allows)."""


def occupancy(program: ir.Program, cfg: GPUConfig, grid=None, resources: str | None = None,
              view: CompilerView | None = None) -> Occupancy:
    """How many CTAs of ``program`` fit on one SM, and which limit binds; raises InfeasibleError.

    Registers per thread come from the compiler's ``view`` (``compiler.view_of`` for ``grid``, as
    launched, when not given: Triton's compiler, or the analytic estimate); ptxas caps them at
    ``max_registers_per_thread`` and spills the rest to local memory."""
    res = cta_resources(program, cfg.compute_capability or 90)
    if res.sram_bytes > cfg.sram_bytes_per_cta_max:
        detail = ", ".join(f"{n} {list(s)} x{st}" for n, s, st, _ in res.sram_detail)
        raise InfeasibleError(
            f"needs {res.sram_bytes / KIB:.0f} KiB of SRAM per CTA, {cfg.name} allows "
            f"{cfg.sram_bytes_per_cta_max / KIB:.0f} KiB ({detail}); use smaller tiles or fewer num_stages")
    warps = program.num_warps
    if warps > cfg.max_warps_per_sm:
        raise InfeasibleError(f"num_warps={warps} exceeds {cfg.max_warps_per_sm} warps per SM on {cfg.name}")
    view = view or view_of(program, cfg, grid, resources)
    shared = getattr(view.compiled, "shared_bytes", 0) or 0   # what Triton allocates (reduction scratch too)
    if shared > cfg.sram_bytes_per_cta_max:
        raise InfeasibleError(
            f"Triton allocates {shared / KIB:.0f} KiB of shared memory per CTA ({view.source}), {cfg.name} allows "
            f"{cfg.sram_bytes_per_cta_max / KIB:.0f} KiB; use a smaller BLOCK, fewer num_stages or fewer num_warps")
    regs, spills = min(view.registers_per_thread, cfg.max_registers_per_thread), view.spills(cfg)
    limits = {
        "ctas": cfg.max_ctas_per_sm,
        "warps": cfg.max_warps_per_sm // warps,
        "sram": cfg.sram_bytes_per_sm // res.sram_bytes if res.sram_bytes else cfg.max_ctas_per_sm,
        "registers": cfg.registers_per_sm // (regs * res.threads),
    }
    limiter = min(limits, key=lambda k: (limits[k], k))
    if limits[limiter] < 1:     # never clamped: a CTA that does not fit on an SM cannot run
        raise InfeasibleError(_does_not_fit(limiter, cfg, res.sram_bytes, regs, res.threads, view.source))
    return Occupancy(limits[limiter], limiter, res.sram_bytes, regs, spills, view.resources, view.compiled)


def _does_not_fit(limiter: str, cfg: GPUConfig, sram: int, regs: int, threads: int, source: str) -> str:
    """The infeasible reason of a CTA that exceeds one SM's ``limiter`` resource, with the numbers."""
    if limiter == "registers":
        return (f"needs {regs * threads:,} registers per CTA ({regs} per thread, {source}, x {threads} threads), "
                f"{cfg.name} has {cfg.registers_per_sm:,} per SM; use fewer warps or smaller tiles")
    if limiter == "sram":
        return (f"needs {sram / KIB:.0f} KiB of SRAM per CTA, {cfg.name} has {cfg.sram_bytes_per_sm / KIB:.0f} KiB "
                f"per SM; use smaller tiles or fewer num_stages")
    return f"no CTA fits on an SM of {cfg.name} ({limiter} limit is 0)"


def mma_duplication(program: ir.Program, arch: int) -> dict:
    """Without the compiled kernel: {dot output id: MMA work the CTA's warps issue / the tile's},
    from the warp tiling Triton picks for each dot (``layouts.dot_layouts``). A warp's mma.sync
    ("v2") covers at least 16 rows x 8 columns and a warpgroup's wgmma ("v3") at least 64 rows, so
    warps beyond what the tile has of those repeat the same block: a 16 x 16 score tile on 4 warps
    tiled (1, 4) computes each 16 x 8 block twice; a chained 64-row wgmma on 8 warps (8, 1), whose
    two warpgroups each need the 64 rows, computes the whole dot twice. This is what the compiled
    loops' HMMA/HGMMA shapes show (``duplication.tensor_duplication``). FMA dots: 1."""
    lay = dot_layouts(Graph(program), arch)
    out = {}
    for d in (o for o in ir.walk(program.body) if isinstance(o, ir.Dot)):
        (kind, wm, wn), (m, n) = lay[id(d)], d.out.shape
        if kind == "fma":
            out[d.out.id] = 1.0
            continue
        issued_m, issued_n = mma_issued(kind, m, n, wm, wn)
        out[d.out.id] = max(1.0, issued_m * issued_n / float(m * n))
    return out

