"""Below-the-tile costs: vector width from alignment, the scalar-access port cost, spill traffic."""
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
