"""The unroll factor of a compute-only loop counts a tanh (sigmoid, erf, sin, cos) as the FP32-pipe
instructions of its SASS: ptxas unrolls the whole sequence, so the compiled body's FFMA/FMUL/...
count is the tile program's per-iteration count times the unroll factor."""
from types import SimpleNamespace

import pytest

from gpusim.backends.sim.codegen import arithmetic_unroll
from gpusim.dsl import ir, load, loop, store, trace
from gpusim.dsl import builder as B
from gpusim.dsl.ir import TensorArg


def _program(fn_name):
    def body(x, y, *, BLOCK):
        t = load(x, (0,), (BLOCK,))

        def it(i, a):
            return (getattr(B, fn_name)(a) * 1.5 + 0.25,) if fn_name else (a * 1.5 + 0.25,)
        (a,) = loop(0, 1024, 1, (t,), it)
        store(y, (0,), a)
    t = [TensorArg("x", (512,), "fp32"), TensorArg("y", (512,), "fp32")]
    return trace(body, "chain", t, num_warps=1, BLOCK=512)      # 16 values per thread


@pytest.mark.parametrize("fn", ["tanh", "sigmoid", "erf", "sin", "cos"])
def test_math_ops_count_their_fp32_instructions(fn):
    per_elem = ir.MATH_UNARY[fn][1] + 1             # the op's FP32 sequence and one FFMA
    unroll = 17
    compiled = SimpleNamespace(loop_bodies=[["FFMA|R1, R2, R3, R4"] * (per_elem * 16 * unroll)])
    assert arithmetic_unroll(compiled, _program(fn)) == unroll


def test_a_plain_fma_loop_is_unchanged():
    compiled = SimpleNamespace(loop_bodies=[["FFMA|R1, R2, R3, R4"] * (16 * 17)])
    assert arithmetic_unroll(compiled, _program(None)) == 17
