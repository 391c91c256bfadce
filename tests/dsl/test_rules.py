"""Triton's tile rules on the IR: the built-in kernels at their defaults pass; each rule fires with
a message naming it; a simulated point that breaks one is infeasible."""
import pytest

from gpusim import simulate
from gpusim.dsl import arange, dot, load, store, trace, zeros
from gpusim.dsl import ir
from gpusim.dsl.rules import TRITON_MAX_TENSOR_NUMEL, TileRuleError, check_program, first_violation, violations
from gpusim.kernels import KERNELS, build


@pytest.mark.parametrize("kernel", list(KERNELS))
def test_builtin_defaults_compile(kernel):
    assert first_violation(build(kernel, {})) is None


def _dot_program(m, n, k):
    a = ir.TensorArg("a", (m, k), "fp16")
    b = ir.TensorArg("b", (k, n), "fp16")
    c = ir.TensorArg("c", (m, n), "fp32")

    def body(a, b, c):
        store(c, (0, 0), dot(load(a, (0, 0), (m, k)), load(b, (0, 0), (k, n))))
    return trace(body, "mm", [a, b, c])


def test_small_dot_names_the_rule_and_dims():
    v = violations(_dot_program(64, 16, 8))
    assert len(v) == 1
    assert "tl.dot needs every dimension >= 16 (K = 8)" in v[0]
    with pytest.raises(TileRuleError, match="K = 8"):
        check_program(_dot_program(64, 16, 8))
    assert violations(_dot_program(16, 16, 16)) == []


def test_non_power_of_two_tile():
    t = ir.TensorArg("x", (1000,), "fp32")

    def body(x):
        store(x, (0,), load(x, (0,), (48,)) * 2.0)
    v = violations(trace(body, "ew", [t]))
    assert v and "load of x of shape (48,): Triton block shapes must be powers of two" in v[0]


def test_arange_power_of_two():
    t = ir.TensorArg("x", (1000,), "int32")

    def body(x):
        store(x, (0,), arange(0, 24))
    assert any("tl.arange of length 24" in m for m in violations(trace(body, "ar", [t])))


def test_block_numel_limit():
    n = 2 * TRITON_MAX_TENSOR_NUMEL
    t = ir.TensorArg("x", (n,), "fp32")

    def body(x):
        store(x, (0,), zeros((n,)))
    assert any("Triton allows at most 1048576" in m for m in violations(trace(body, "big", [t])))


def test_head_dim_3_flash_is_infeasible():
    r = simulate("attention_flash", "h100", head_dim=3, seq_len=256, batch=1, heads=1)
    assert r.status == "infeasible"
    assert "tl.dot needs every dimension >= 16 (K = 4)" in r.reason


def test_naive_softmax_row_over_2_20_breaks_the_block_limit():
    why = first_violation(build("attention_naive", dict(seq_len=1 << 21, batch=1, heads=1, head_dim=16)))
    assert why.startswith("softmax: tile of shape (1, 2097152)") and "2**20" in why
