"""gpusim.dsl.builder: tracing a body gives the expected ops, shapes and dtypes; misuse is a TraceError."""
import pytest

from gpusim import dsl
from gpusim.dsl import ir


def _trace(fn, params, **kw):
    return dsl.trace(fn, "k", params, **kw)


def test_elementwise_trace_and_broadcast():
    x = ir.TensorArg("x", (128,), "fp16")
    y = ir.TensorArg("y", (128,), "fp16")

    def body(x, y):
        pid = dsl.program_id(0)
        t = dsl.load(x, (pid * 64,), (64,))
        dsl.store(y, (pid * 64,), dsl.maximum(t * 1.5 + 0.25, 0.0))

    p = _trace(body, [x, y])
    kinds = [type(op).__name__ for op in p.body]
    assert kinds[0] == "Load" and kinds[-1] == "Store"
    assert {"Binary"} <= set(kinds)
    assert p.grid_rank == 1 and p.num_warps == 4
    store = p.body[-1]
    assert store.value.dtype == "fp16" and store.value.shape == (64,)     # cast back to the tensor dtype
    assert ir.eval_expr(p.body[0].offsets[0], (3, 0, 0), {}) == 192


def test_grid_rank_comes_from_the_highest_program_id_axis():
    x = ir.TensorArg("x", (4, 64), "fp32")

    def body(x):
        dsl.store(x, (dsl.program_id(1), 0), dsl.zeros((64,)))

    assert _trace(body, [x]).grid_rank == 2


def test_dot_loop_and_carried_values():
    a = ir.TensorArg("a", (64, 256), "fp16")
    b = ir.TensorArg("b", (256, 32), "fp16")
    c = ir.TensorArg("c", (64, 32), "fp32")

    def body(a, b, c):
        def step(k, acc):
            return (dsl.dot(dsl.load(a, (0, k), (64, 64)), dsl.load(b, (k, 0), (64, 32)), acc),)

        (acc,) = dsl.loop(0, 256, 64, [dsl.zeros((64, 32))], step, stages=3)
        dsl.store(c, (0, 0), acc)

    p = _trace(body, [a, b, c], num_warps=8)
    loop = next(op for op in p.body if isinstance(op, ir.Loop))
    assert (loop.step, loop.stages) == (64, 3)
    dot = next(op for op in loop.body if isinstance(op, ir.Dot))
    assert dot.out.shape == (64, 32) and dot.out.dtype == "fp32" and dot.acc is loop.args[0]
    assert loop.yields == (dot.out,)
    assert p.num_warps == 8


@pytest.mark.parametrize("bad", ["offsets", "dot", "outside"])
def test_misuse_is_a_trace_error(bad):
    x = ir.TensorArg("x", (64, 64), "fp16")

    def body(x):
        if bad == "offsets":
            dsl.load(x, (0,), (64, 64))
        elif bad == "dot":
            dsl.dot(dsl.load(x, (0, 0), (64, 32)), dsl.load(x, (0, 0), (64, 32)))

    if bad == "outside":
        with pytest.raises(dsl.TraceError, match="inside a kernel"):
            dsl.load(x, (0, 0), (64, 64))
    else:
        with pytest.raises(dsl.TraceError):
            _trace(body, [x])
