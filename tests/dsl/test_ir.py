"""gpusim.dsl.ir: symbolic index expressions, value sizes, walking loop bodies."""
import pytest

from gpusim.dsl import ir


def test_constant_folding_keeps_expressions_small():
    p = ir.Expr("pid", (0,))
    assert ir.const(3) + 4 == ir.const(7)
    assert p + 0 is p and 0 + p is p and p * 1 is p and 1 * p is p
    assert p * 0 == ir.const(0)
    assert ir.emin(3, 5) == ir.const(3) and ir.emax(3, 5) == ir.const(5)


@pytest.mark.parametrize("pid,lv", [((0, 0, 0), {0: 0}), ((3, 1, 0), {0: 5}), ((7, 2, 1), {0: -2})])
def test_eval_matches_python_arithmetic(pid, lv):
    x, y, i = ir.Expr("pid", (0,)), ir.Expr("pid", (1,)), ir.Expr("loopvar", (0,))
    e = ir.emin((x * 64 + i) // 3 - y, ir.emax(i, 2) * 5)
    px, py, pi = pid[0], pid[1], lv[0]
    assert ir.eval_expr(e, pid, lv) == min((px * 64 + pi) // 3 - py, max(pi, 2) * 5)


def test_expr_str_is_python_source():
    x, i = ir.Expr("pid", (0,)), ir.Expr("loopvar", (1,))
    e = (x * 64 + i) // 2
    assert ir.expr_str(e) == "(((pid0 * 64) + i1) // 2)"
    assert eval(ir.expr_str(e), {"pid0": 3, "i1": 10}) == ir.eval_expr(e, (3, 0, 0), {1: 10})


def test_sizes():
    t = ir.TensorArg("q", (2, 128, 64), "fp16")
    assert t.nbytes == 2 * 128 * 64 * 2
    assert ir.Value(1, (16, 8), "fp32").numel == 128
    assert ir.Value(2, (), "fp32").numel == 1


def test_walk_descends_into_loops():
    v = [ir.Value(k, (4,), "fp32") for k in range(6)]
    inner = ir.Unary(v[2], "exp", v[1])
    loop = ir.Loop(0, ir.const(0), ir.const(4), 1, 1, (v[0],), (v[1],), (inner,), (v[2],), (v[3],))
    after = ir.Unary(v[4], "neg", v[3])
    assert list(ir.walk([loop, after])) == [loop, inner, after]


def test_launch_counts_programs():
    p = ir.Program("p", (), ())
    assert ir.Launch("l", p, (4, 3, 2), {}).num_programs == 24
