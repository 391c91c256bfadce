"""Below-the-tile costs: vector width from alignment, the scalar-access port cost, spill traffic."""
import pytest

from gpusim.backends.sim import codegen
from gpusim.dsl import ir
from gpusim.hardware import load_gpu


def t(shape, dtype="fp16"):
    return ir.TensorArg("x", tuple(shape), dtype)


def test_pow2_divisor():
    assert [codegen.pow2_divisor(n) for n in (1, 2, 12, 4100, 1 << 20, 1000003)] == [1, 2, 4, 4, 1 << 20, 1]


def test_vector_width_from_alignment():
    # aligned 1-d stream: 16-byte vectors (8 fp16, 4 fp32)
    assert codegen.vector_width(t([1 << 24]), (1024,)) == 8
    assert codegen.vector_width(t([1 << 24], "fp32"), (1024,)) == 4
    # an odd length needs a mask on the last tile: scalar accesses
    assert codegen.vector_width(t([1000003]), (1024,)) == 1
    # rows of 4100 fp16 start on 8-byte boundaries only: 4-element vectors
    assert codegen.vector_width(t([3001, 4100]), (128, 64)) == 4
    # rows of 4096: full vectors even though the row count is odd
    assert codegen.vector_width(t([3001, 4096]), (128, 64)) == 8
    # a tile narrower than a vector cannot use more than its width
    assert codegen.vector_width(t([64, 4]), (64, 4)) == 4


def test_port_cost_only_for_narrow_accesses():
    cfg = load_gpu("h200").model_copy(update={"scalar_access_per_clk_per_sm": {2: 2.0, 4: 3.0}})
    # a full vector: just its bytes
    assert codegen.port_bytes(2048.0, 1024, 2, 8, cfg) == 2048.0
    # scalar fp16: 1024 elements / 2 per clock = 512 cycles of the port
    assert codegen.port_bytes(2048.0, 1024, 2, 1, cfg) == 512 * cfg.sm_load_bytes_per_clk
    # 4-wide fp16 (8 bytes): 1024 / (2 * 4) = 128 cycles
    assert codegen.port_bytes(2048.0, 1024, 2, 4, cfg) == max(2048.0, 128 * cfg.sm_load_bytes_per_clk)
    ideal = cfg.model_copy(update={"scalar_access_per_clk_per_sm": {}})
    assert codegen.port_bytes(2048.0, 1024, 2, 1, ideal) == 2048.0


def test_spill_traffic_estimate_and_compiled():
    prog = ir.Program("p", (), (), num_warps=4)
    # 300 registers wanted: 45 spilled, stored and reloaded each iteration: 2 * 4 B * 45 * 128 threads
    assert codegen.spill_bytes_per_iteration(prog, estimated_registers=300) == 2 * 4 * 45 * 128
    assert codegen.spill_bytes_per_iteration(prog, estimated_registers=200) == 0.0

    class Compiled:
        loop_spill_bytes = 1024          # STL + LDL bytes per thread in the loop body

    assert codegen.spill_bytes_per_iteration(prog, Compiled()) == 1024 * 128


def test_loop_issue_from_instruction_mix():
    cfg = load_gpu("h200")

    class Compiled:
        # per warp, per iteration: 2 HGMMA (tensor pipe, not issue-costed), 100 other instructions,
        # 10 of them MUFU (the parser also lists the detail class MUFU.EX2, not counted twice)
        sass_loop = (("FFMA", 60), ("HGMMA", 2), ("MUFU", 10), ("MUFU.EX2", 10), ("SHFL", 30))

    issue, sfu = codegen.loop_issue_cycles(Compiled(), 8, cfg)
    assert issue == 100 * 8 / 4.0                                   # 8 warps over 4 schedulers
    assert sfu == 10 * 8 * 32 / cfg.sfu_ops_per_clk_per_sm          # 32 lanes per MUFU per warp

    class Unknown:
        sass_loop = ()

    assert codegen.loop_issue_cycles(Unknown(), 4, cfg) is None


def test_loop_spill_share_and_adjusted_loop():
    class Compiled:
        sass = (("LDL", 8), ("STL", 4))
        sass_loop = (("LDL", 6), ("STL", 4))
        spill_store_bytes, spill_load_bytes = 64, 128
    # all 64 store bytes and 6/8 of the 128 load bytes sit in the loop
    assert codegen.loop_spill_bytes_per_thread(Compiled()) == 64 + 96


def test_tensor_duplication_from_the_compiled_mma_shapes():
    """A loop whose compiled body issues 1.5x its tiles' dot FLOPs (8 warps on a 64-row flash tile:
    each warpgroup computes the whole Q K^T) has its tensor steps scaled by 1.5; never below 1."""
    from gpusim.backends.sim.steps import LoopStep, TensorStep

    def loop(*flops):
        return LoopStep(0, 8, 1, 2, 0, (), tuple(TensorStep(cycles=100.0, flops=f) for f in flops))

    class Compiled:
        loop_mma_flops = 2.0 * 64 * 32 * 16 / 4 * 12        # 12 HGMMA.64x32x16 per warpgroup per iteration

    tile = 2 * 64 * 64 * 64 * 2                              # QK^T and PV of a 64x64 tile, d 64
    assert codegen.tensor_duplication(Compiled(), 8, [loop(tile / 2, tile / 2)]) == 1.5
    assert codegen.tensor_duplication(Compiled(), 4, [loop(tile / 2, tile / 2)]) == 1.0   # 0.75 -> never lowered

    class Unknown:
        loop_mma_flops = None

    assert codegen.tensor_duplication(Unknown(), 8, [loop(tile)]) == 1.0
    assert codegen.tensor_duplication(None, 8, [loop(tile)]) == 1.0


def test_unroll_factor_from_the_loop_loads():
    """ptxas unrolled a 64x64x32 GEMM loop 4x: its body loads 4x the tiles' bytes per thread, so its
    counts stand for 4 iterations (and its 4x MMA FLOPs are not duplication)."""
    from gpusim import kernels
    from gpusim.backends.sim import steps as st

    cfg = load_gpu("h200")
    wl = kernels.build("matmul", dict(M=512, N=512, K=512, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, num_warps=4))
    prog = wl.launches[0].program
    loops = [s for s in st.compile_program(prog, cfg)[0] if isinstance(s, st.LoopStep)]
    per_thread = (64 * 32 + 32 * 64) * 2 / 128                 # A and B tiles, fp16, over 128 threads

    class Unrolled:
        loop_load_bytes = 4 * per_thread
        loop_mma_flops = 4 * 2 * 64 * 64 * 32 / 4

    u = codegen.unroll_factor(Unrolled(), prog, loops)
    assert u == 4 and codegen.tensor_duplication(Unrolled(), 4, loops, u) == 1.0

    class Unknown:
        loop_load_bytes = None

    assert codegen.unroll_factor(Unknown(), prog, loops) == 1

    class CopiesTwice:          # 3x the tiles' load bytes, but MMAs for 1.5 iterations: not unrolled
        loop_load_bytes = 3 * per_thread
        loop_mma_flops = 1.5 * 2 * 64 * 64 * 32 / 4

    assert codegen.unroll_factor(CopiesTwice(), prog, loops) == 1


def test_staging_class_from_row_alignment():
    """A tile staged into shared memory is classed by the widest access Triton can prove aligned and
    by whether its rows start on 128-byte lines (benchmarks/kernels/stage_dot.py's pads)."""
    cls = {}
    for pad in (0, 8, 4, 2, 1):
        t = ir.TensorArg("k", (4096, 128 + pad), "fp16")
        cls[pad] = codegen.staging_class(t, (64, 128), codegen.vector_width(t, (64, 128)))
    assert cls == {0: None, 8: "line", 4: "8", 2: "4", 1: "2"}
    # a tile of whole 64-byte rows (flash K at head_dim 32) is one contiguous block: aligned
    kv = ir.TensorArg("k", (4096, 32), "fp16")
    assert codegen.staging_class(kv, (64, 32), codegen.vector_width(kv, (64, 32))) is None
    cfg = load_gpu("h200")
    costs = [codegen.staging_cost(ir.TensorArg("k", (4096, 128 + pad), "fp16"), (64, 128),
                                  codegen.vector_width(ir.TensorArg("k", (4096, 128 + pad), "fp16"), (64, 128)), cfg)
             for pad in (0, 8, 1)]
    assert costs[0] == 1.0 and 1.0 < costs[1] < costs[2]
    assert codegen.staging_cost(ir.TensorArg("k", (4096, 129), "fp16"), (64, 128), 1, load_gpu("h100-ideal")) == 1.0


def test_odd_pitch_gemm_is_slower_than_aligned():
    """Staging B from rows an odd number of elements apart costs time the aligned GEMM does not pay,
    and the ideal config (no staging costs) does not charge it."""
    import gpusim

    def t(n, gpu):
        return gpusim.simulate("matmul", gpu, M=1024, N=n, K=1024, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64,
                               check=False).time_us
    assert t(2047, "h200") > 1.5 * t(2048, "h200")
    assert t(2047, "h100-ideal") < 1.1 * t(2048, "h100-ideal")


def test_unknown_staging_class_is_a_clear_error():
    import pytest
    from pydantic import ValidationError

    from gpusim.hardware import GPUConfig

    data = load_gpu("h200").model_dump()
    data["staged_access_cost"] = {"16": 1.2}
    with pytest.raises(ValidationError, match="unknown staging class 16; allowed: line, 8, 4, 2"):
        GPUConfig.model_validate(data)


def test_port_width_pitch_limited_rows_keep_contiguous_lanes():
    """Rows whose pitch is not 16-byte aligned: Triton lays lanes on consecutive elements, so the
    access pays its bytes (the width for the port is the full vector); a 1-D tensor whose length
    only masks the last tile keeps the 16-byte layout split into element accesses (narrow)."""
    rows = ir.TensorArg("x", (2048, 9999), "fp16")
    assert codegen.vector_width(rows, (1, 1024)) == 1
    assert codegen.port_width(rows, (1, 1024)) == 8
    flat = ir.TensorArg("x", (16777217,), "fp16")
    assert codegen.vector_width(flat, (1024,)) == 1
    assert codegen.port_width(flat, (1024,)) == 1
    aligned = ir.TensorArg("x", (2048, 8192), "fp16")
    assert codegen.port_width(aligned, (1, 1024)) == codegen.vector_width(aligned, (1, 1024)) == 8
    # a single-row tensor is a flat one
    assert codegen.port_width(ir.TensorArg("w", (1, 9999), "fp16"), (1, 1024)) == 1


def test_store_port_bytes_carries_the_whole_copy():
    """The copy's measured narrow rate is charged to its stores: two element accesses per element."""
    cfg = load_gpu("h200").model_copy(update={"scalar_access_per_clk_per_sm": {2: 2.0}})
    flat = ir.TensorArg("y", (16777217,), "fp16")
    # 1024 fp16 elements stored scalar: 2048 accesses / 2 per clock = 1024 port cycles
    assert codegen.store_port_bytes(flat, (1024,), 2048.0, cfg) == 1024 * cfg.sm_load_bytes_per_clk
    # pitch-limited rows and aligned stores cost their bytes
    assert codegen.store_port_bytes(ir.TensorArg("y", (64, 9999), "fp16"), (1, 1024), 2048.0, cfg) == 2048.0
    assert codegen.store_port_bytes(ir.TensorArg("y", (1 << 24,), "fp16"), (1024,), 2048.0, cfg) == 2048.0


def _two_pass_program():
    """A streamed row kernel: a summing pass, then a scaling pass that stores (two loops)."""
    from gpusim import dsl

    x = ir.TensorArg("x", (1 << 16,), "fp32")
    y = ir.TensorArg("y", (1 << 16,), "fp32")

    def body(x, y):
        def stats(i, acc):
            return (acc + dsl.load(x, (i,), (1024,)),)

        (acc,) = dsl.loop(0, 1 << 16, 1024, [dsl.zeros((1024,))], stats)
        tot = dsl.tsum(acc, 0)

        def scale(i):
            dsl.store(y, (i,), dsl.load(x, (i,), (1024,)) * tot)
            return ()

        dsl.loop(0, 1 << 16, 1024, [], scale)

    return dsl.trace(body, "two_pass", [x, y], num_warps=4)


def test_each_loop_takes_its_own_compiled_body():
    # a streamed softmax's SASS has one body per pass: each pass costs its own instructions,
    # not the two together (which raised each pass to both passes' issue and MUFU time)
    from gpusim.backends.sim import steps as st
    from gpusim.backends.sim.steps import LoopStep, SimtStep

    cfg = load_gpu("h200")
    prog = _two_pass_program()
    base, _ = st.compile_program(prog, cfg)
    body1 = ("FADD|R1|R1 R2",) * 2000 + ("MUFU.EX2|R3|R2",) * 100
    body2 = ("FMUL|R4|R5 R6",) * 500

    class Compiled:
        sass = (("FADD", 2000), ("FMUL", 500), ("MUFU", 100))
        sass_loop = (("FADD", 2000), ("FMUL", 500), ("MUFU", 100), ("MUFU.EX2", 100))
        loop_bodies = (body1, body2)
        spill_store_bytes = spill_load_bytes = 0
        straight_body = None

    class Occ:
        compiled = Compiled()

    adj = codegen.adjust_loops(base, prog, Occ(), cfg)
    loops = [s for s in adj if isinstance(s, LoopStep)]
    simt = [[b for b in s.body if isinstance(b, SimtStep)] for s in loops]
    issue1 = sum(b.vector_cycles for b in simt[0])
    issue2 = sum(b.vector_cycles for b in simt[1])
    assert issue1 == pytest.approx(2100 * 4 / cfg.warp_issue_per_clk_per_sm)
    assert issue2 == pytest.approx(500 * 4 / cfg.warp_issue_per_clk_per_sm)
    assert sum(b.sfu_cycles for b in simt[1]) == 0.0         # the MUFUs are the first pass's

    class Summed(Compiled):
        loop_bodies = None               # bodies unknown: the summed counts, shared by SIMT time

    adj = codegen.adjust_loops(base, prog, type("O", (), {"compiled": Summed()})(), cfg)
    tot = sum(b.vector_cycles for s in adj if isinstance(s, LoopStep) for b in s.body if isinstance(b, SimtStep))
    assert tot == pytest.approx(2600 * 4 / cfg.warp_issue_per_clk_per_sm)


def test_a_loop_that_loads_nothing_is_unrolled_by_its_arithmetic():
    # triton 3.6 / ptxas on benchmarks/kernels/spill_live.py, 16 fp32 values per thread on 4 warps,
    # 1024 iterations of x * a + b: the loop body holds 272 FFMA (17 iterations) and its counter
    from gpusim.backends.sim import steps as st
    from gpusim.backends.sim.steps import LoopStep
    from gpusim.kernels import resolve_kernel

    k = resolve_kernel("benchmarks/kernels/spill_live.py:spill_live")
    prog = k.build(k.resolve({"per_thread": 16, "num_warps": 4, "ctas": 4, "iters": 1024})).launches[0].program
    loops = [s for s in st.compile_program(prog, load_gpu("h200"))[0] if isinstance(s, LoopStep)]

    class Compiled:
        loop_load_bytes = 0.0
        loop_bodies = (("FFMA|R1|R1 R2",) * 272 + ("UIADD3|UR4|UR4", "ISETP.NE.U32.AND|P0|UR4", "BRA||P0"),)
        loop_mma_flops = None

    assert codegen.unroll_factor(Compiled(), prog, loops) == 17

    class NotUnrolled(Compiled):
        loop_bodies = (("FFMA|R1|R1 R2",) * 16 + ("BRA||P0",),)

    assert codegen.unroll_factor(NotUnrolled(), prog, loops) == 1
