"""gpusim.backends.sim.cost: each op's cost against a closed form worked out by hand (h100-ideal.yaml).

h100: 132 SMs at 1.83 GHz; fp16 tensor 989e12 FLOP/s -> 989e12 / (132 * 1.83e9) = 4094.2 FLOP/clk/SM;
FP32 67e12 FLOP/s, an FMA being 2 FLOPs -> 67e12 / 2 / (132 * 1.83e9) = 138.68 lane-ops/clk/SM;
SFU 16 ops/clk/SM."""
import pytest

from gpusim import kernels
from gpusim.backends.sim import cost
from gpusim.dsl import ir
from gpusim.hardware import load_gpu

CFG = load_gpu("h100-ideal").model_copy(update={"tensor_tile_efficiency": [], "simt_lane_ops_per_clk_per_sm": {}})


def v(i, shape, dtype="fp32"):
    return ir.Value(i, shape, dtype)


def test_rates_from_the_datasheet():
    assert CFG.tensor_flops_per_clk_per_sm("fp16") == pytest.approx(989e12 / (132 * 1.83e9))
    assert CFG.vector_ops_per_clk_per_sm == pytest.approx(67e12 / 2 / (132 * 1.83e9))


def test_dot_cost():
    # 128x64 @ 64x128 fp16: 2 * 128 * 128 * 64 = 2,097,152 FLOPs / 4094.2 FLOP/clk = 512.2 cycles
    op = ir.Dot(v(3, (128, 128)), v(1, (128, 64), "fp16"), v(2, (64, 128), "fp16"), None)
    c = cost.op_cost(op, CFG, 4)
    assert c.tensor_flops == 2 * 128 * 128 * 64
    assert c.tensor_cycles == pytest.approx(2097152 / (989e12 / (132 * 1.83e9)))
    assert c.tensor_cycles == pytest.approx(512.2, abs=0.1)
    assert c.simt_cycles == 0


def test_dot_on_fp32_operands_runs_on_the_fp32_pipe():
    """The lowering gives fp32 dots input_precision="ieee" (FFMA, no TF32): 64^3 = 262,144 FFMAs;
    a 64x64 fp32 accumulator on 4 warps is 32 per thread, whose compiled loop issues 1.15
    instructions per FFMA (the operands' LDS) -> 262144 * 1.15 / 138.68 = 2173.8 cycles."""
    op = ir.Dot(v(3, (64, 64)), v(1, (64, 64)), v(2, (64, 64)), None)
    c = cost.op_cost(op, CFG, 4)
    assert c.tensor_cycles == 0 and c.tensor_flops == 0
    assert c.simt_cycles == pytest.approx(2173.8, abs=0.1)
    assert cost.vector_flops(op) == 2 * 64 ** 3
    mixed = ir.Dot(v(3, (64, 64)), v(1, (64, 64), "fp16"), v(2, (64, 64), "bf16"), None)
    assert cost.op_cost(mixed, CFG, 4) == c                    # fp16 x bf16 is lowered as fp32 too


def test_elementwise_and_sfu_costs():
    lane = 67e12 / 2 / (132 * 1.83e9)
    add = ir.Binary(v(2, (128, 64)), "add", v(1, (128, 64)), 1.0)
    # 8192 elements / 138.68 lane-ops per clock = 59.07 issue cycles
    assert cost.op_cost(add, CFG, 4).simt_cycles == pytest.approx(8192 / lane)
    assert cost.vector_flops(add) == 8192
    ex2 = ir.Unary(v(2, (128, 64)), "exp2", v(1, (128, 64)))
    c = cost.op_cost(ex2, CFG, 4)
    # exp2: 8192 issue slots at the FP32 rate and 8192 / 16 = 512 cycles on the SFU
    assert (c.simt_cycles, c.sfu_cycles, c.sfu_ops) == (pytest.approx(8192 / lane), 512.0, 8192)
    ex = ir.Unary(v(2, (128, 64)), "exp", v(1, (128, 64)))
    # exp: its SASS (compiler.sass_mix.MATH) is one MUFU.EX2 and 4 more instructions (the scaling by
    # log2 e and the range fix-up): 5 issue slots per element
    assert cost.op_cost(ex, CFG, 4).simt_cycles == pytest.approx(5 * 8192 / lane)
    div = ir.Binary(v(2, (128, 64)), "div", v(1, (128, 64)), v(3, (128, 64)))
    # fp32 division: MUFU.RCP and 7 instructions of its correction; one SFU op per element
    c = cost.op_cost(div, CFG, 4)
    assert (c.simt_cycles, c.sfu_cycles) == (pytest.approx(8 * 8192 / lane), 512.0)
    cmp_ = ir.Binary(v(2, (128, 64), "bool"), "lt", v(1, (128, 64)), 0.0)
    assert cost.vector_flops(cmp_) == 0                       # comparisons are not arithmetic


def test_reduce_and_materialised_constants():
    lane = 67e12 / 2 / (132 * 1.83e9)
    red = ir.Reduce(v(2, (128,)), "max", v(1, (128, 64)), 1)
    # a reduction reads every input element: 8192 / lane
    assert cost.op_cost(red, CFG, 4).simt_cycles == pytest.approx(8192 / lane)
    assert cost.vector_flops(red) == 8192
    full = ir.Full(v(1, (128, 64)), 0.0)
    # one write per warp-register: 8192 / 32 / lane
    assert cost.op_cost(full, CFG, 4).simt_cycles == pytest.approx(8192 / 32 / lane)
    assert cost.op_cost(ir.Trans(v(2, (64, 128)), v(1, (128, 64))), CFG, 4) == cost.OpCost()


def test_measured_simt_rates_override_the_fp32_rate():
    cfg = CFG.model_copy(update={"simt_lane_ops_per_clk_per_sm": {"add": 64.0}})
    add = ir.Binary(v(2, (128,)), "add", v(1, (128,)), 1.0)
    assert cost.op_cost(add, cfg, 4).simt_cycles == 2.0      # 128 elements / 64 per clock


def test_occupancy_closed_form():
    """flash attention 128x128 tiles, head_dim 128, 3 stages: SRAM = Q 128*128*2 B + 3 x (K + V) =
    32 KiB + 3 x 64 KiB = 224 KiB per CTA; 228 KiB per SM fits one."""
    from gpusim.kernels import build, resolve_params

    p = resolve_params("attention_flash", dict(batch=1, heads=1, seq_len=1024, head_dim=128, BLOCK_M=128,
                                               BLOCK_N=128, num_stages=3))
    prog = build("attention_flash", p).launches[0].program
    occ = cost.occupancy(prog, load_gpu("h100-ideal"))
    assert occ.sram_bytes_per_cta == 224 * 1024
    assert (occ.ctas_per_sm, occ.limiter) == (1, "sram")


def _flash_dup(arch=90, **p):
    """[est_dup of each dot] of a flash forward tile program, in program order."""
    prog = kernels.build("attention_flash", dict(batch=1, heads=1, seq_len=256, **p)).launches[0].program
    dup = cost.mma_duplication(prog, arch)
    return [dup[d.out.id] for d in ir.walk(prog.body) if isinstance(d, ir.Dot)]


def test_mma_duplication_of_wgmma_chains():
    """A chained 64-row wgmma on more warpgroups than 64-row groups is computed by each: x2 for a
    64-row tile on 8 warps, x4 on 16, none for 128 rows on 8 warps or for 4 warps; the P V dot
    splits its columns and repeats nothing."""
    d = dict(head_dim=64, BLOCK_N=64)
    assert _flash_dup(BLOCK_M=64, num_warps=8, **d) == [2.0, 1.0]
    assert _flash_dup(BLOCK_M=64, num_warps=16, **d) == [4.0, 1.0]
    assert _flash_dup(BLOCK_M=128, num_warps=8, **d) == [1.0, 1.0]
    assert _flash_dup(BLOCK_M=128, num_warps=16, **d) == [2.0, 1.0]
    assert _flash_dup(BLOCK_M=64, num_warps=4, **d) == [1.0, 1.0]


def test_mma_duplication_of_small_mma_sync_tiles():
    """Below 64 rows the dots are mma.sync (16 x 8 blocks per warp) and the chained pair is tiled
    (1, num_warps): a 16 x 16 score tile on 4 warps has two 16 x 8 blocks for four warps, so each
    is computed twice. The compiled sm_90 loop of this tile (head_dim 64, BLOCK_N 16) holds 6
    HMMA.16816 per warp, 4 x 6 x 4096 = 98,304 FLOPs for the tiles' 65,536: 1.5x the loop, which
    ``compiled_steps.estimated_duplication`` reproduces. On sm_80 the same (mma.sync there too)."""
    from gpusim.backends.sim import compiled_steps
    from gpusim.backends.sim.steps import LoopStep, compile_program

    assert _flash_dup(BLOCK_M=16, BLOCK_N=16, head_dim=64) == [2.0, 1.0]
    assert _flash_dup(80, BLOCK_M=16, BLOCK_N=16, head_dim=64) == [2.0, 1.0]
    assert _flash_dup(BLOCK_M=32, BLOCK_N=16, head_dim=64, num_warps=8) == [4.0, 1.0]
    assert _flash_dup(BLOCK_M=16, BLOCK_N=64, head_dim=128) == [1.0, 1.0]
    prog = kernels.build("attention_flash", dict(batch=1, heads=1, seq_len=256, head_dim=64, BLOCK_M=16,
                                                 BLOCK_N=16, num_stages=1)).launches[0].program
    steps, _ = compile_program(prog, load_gpu("h200"))
    loops = [s for s in steps if isinstance(s, LoopStep)]
    assert compiled_steps.estimated_duplication(loops) == pytest.approx(24576 * 4 / 65536)


def test_repeats_of_a_measured_tile_are_counted_once():
    """A tile efficiency is a tile's FLOPs over its measured time; the 16 x 16 tile was measured on 4
    warps, which compute each 16 x 8 block twice (on other sub-partitions, in that time). The step's
    FLOPs are scaled by the dot's own repeats, so the shared repeats are taken out of the rate: on
    4 warps the step costs the measured tile's time (2 repeats at twice the rate), on 8 warps
    twice it (4 repeats), on 2 warps (no repeat) the measured time. Tiles of 64 rows or more repeat
    nothing on 4 warps: unchanged."""
    from gpusim.hardware import TileEfficiency

    cfg = load_gpu("h100-ideal").model_copy(update={"tensor_tile_efficiency": [
        TileEfficiency(m=16, n=16, k=64, num_warps=4, efficiency=0.05),
        TileEfficiency(m=128, n=128, k=64, num_warps=4, efficiency=0.9)]})
    assert cost.issued_efficiency(cfg, 16, 16, 64, 4) == pytest.approx(0.10)
    assert cost.issued_efficiency(cfg, 16, 16, 64, 8) == pytest.approx(0.10)
    assert cost.issued_efficiency(cfg, 16, 16, 64, 2) == pytest.approx(0.05)
    assert cost.issued_efficiency(cfg, 128, 128, 64, 4) == pytest.approx(0.9)
    measured = 2 * 16 * 16 * 64 / (cfg.tensor_flops_per_clk_per_sm("fp16") * 0.05)
    for warps, times in ((2, 1.0), (4, 1.0), (8, 2.0)):
        prog = kernels.build("gemv_splitk", dict(M=1, N=4096, K=4096, BLOCK_M=16, BLOCK_N=16, BLOCK_K=64, SPLIT_K=4,
                                                 num_stages=2, dtype="fp16", num_warps=warps)).launches[0].program
        (op,) = [o for o in ir.walk(prog.body) if isinstance(o, ir.Dot)]
        repeats = cost.mma_duplication(prog, 90)[op.out.id]
        assert cost.op_cost(op, cfg, warps).tensor_cycles * repeats == pytest.approx(times * measured)


def test_chained_dots_of_flash_and_backward():
    """flash: S = Q K^T feeds P V (chained), P V does not; the backward's dK/dV loop chains its
    P^T and dP^T dots into dV and dK, the dQ loop its S and dP dots into dQ."""
    from gpusim.dsl import analysis, ir

    def first_dots(kernel, **p):
        out = []
        for la in kernels.build(kernel, p).launches:
            dots = [op for op in ir.walk(la.program.body) if isinstance(op, ir.Dot)]
            chained = analysis.chained_dot_outputs(la.program)
            out.append([d.out.id in chained for d in dots])
        return out

    assert first_dots("attention_flash", batch=1, heads=1, seq_len=256, head_dim=64) == [[True, False]]
    bwd = first_dots("attention_flash_bwd", batch=1, heads=1, seq_len=256, head_dim=64)
    assert [sum(x) for x in bwd] == [0, 2, 2] and [len(x) for x in bwd] == [0, 4, 3]
