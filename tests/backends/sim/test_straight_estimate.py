"""The estimated view's straight-line floor (``straight_estimate.py``): the DSL ops outside loops
as dependent chains through the warp scoreboard, so a few-CTA kernel held by one long chain gets a
floor without the compiled kernel too."""
import pytest

from gpusim.backends.sim import compiled_steps, cost
from gpusim.backends.sim.steps import SimtStep, compile_program
from gpusim.backends.sim.straight_estimate import estimated_straight_cycles, straight_body
from gpusim.dsl import exp, load, program_id, silu, store, trace, tsum
from gpusim.dsl.ir import TensorArg
from gpusim.hardware import load_gpu

CFG = load_gpu("h100")


def _program(body, shape, warps, dtype="fp32"):
    x, y = TensorArg("x", shape, dtype), TensorArg("y", shape, dtype)
    return trace(body, "k", [x, y], num_warps=warps, BLOCK=shape[1])


def _exp_row(x, y, *, BLOCK):
    store(y, (program_id(0), 0), exp(load(x, (program_id(0), 0), (1, BLOCK))))


def _swiglu_row(x, y, *, BLOCK):
    g = load(x, (program_id(0), 0), (1, BLOCK))
    store(y, (program_id(0), 0), silu(g) * g)


def test_one_element_per_thread_is_one_chain_of_its_latencies():
    # exp on 32 lanes of one warp: FMUL FMUL MUFU FMUL FMUL, each reading the one before; the last
    # issues after 3 FP32 latencies and one MUFU latency
    lat = CFG.dependent_latency_cycles
    prog = _program(_exp_row, (4, 32), 1)
    code = [i.split("|") for i in straight_body(prog)]
    assert [op for op, _, _ in code] == ["FMUL", "FMUL", "MUFU", "FMUL", "FMUL"]
    assert all(src == prev_dst for (_, prev_dst, _), (_, _, src) in zip(code, code[1:]))
    assert estimated_straight_cycles(prog, CFG) == pytest.approx(3 * lat["fp32"] + lat["mufu"] + 1)


def test_a_row_sum_is_a_tree_in_the_thread_then_shuffles_then_one_round_across_warps():
    def body(x, y, *, BLOCK):
        v = load(x, (program_id(0), 0), (1, BLOCK))
        store(y, (program_id(0), 0), v + tsum(v, 1)[:, None])

    ops = [i.split("|")[0] for i in straight_body(_program(body, (8, 1024), 4))]
    # 1024 / 128 threads = 8 elements each: 7 adds and the result; 32 lanes: 5 shuffles; 4 warps: 2 more
    assert ops.count("SHFL.BFLY") == 5 + 2 and ops.count("BAR") == 1 and ops.count("STS") == 1


def test_a_few_row_swiglu_gets_a_floor_above_its_pipe_time_in_the_estimated_view():
    # 4096 columns, 4 warps: 32 elements per thread through silu's two MUFU chains, two at a time;
    # the chain binds (sm_90 SASS of this kernel: 1917 cycles on the compiled view's scoreboard)
    prog = _program(_swiglu_row, (256, 4096), 4, "bf16")
    floor = estimated_straight_cycles(prog, CFG)
    steps, _ = compile_program(prog, CFG)
    pipe = sum(max(s.vector_cycles, s.sfu_cycles) for s in steps if isinstance(s, SimtStep))
    assert 1.5 * pipe < floor < 2500
    occ = cost.occupancy(prog, CFG, (256,), resources="estimated")
    adjusted = compiled_steps.adjust_loops(steps, prog, occ, CFG)
    assert sum(s.min_cycles for s in adjusted if isinstance(s, SimtStep)) == pytest.approx(floor)


def test_the_floor_grows_with_the_elements_each_thread_chains():
    few = estimated_straight_cycles(_program(_swiglu_row, (256, 4096), 8, "bf16"), CFG)
    many = estimated_straight_cycles(_program(_swiglu_row, (256, 4096), 2, "bf16"), CFG)
    assert many > 2.5 * few
