"""Each silent failure a new user hit now computes the right value or raises at trace time."""
import math

import numpy as np
import pytest

from gpusim import dsl
from gpusim.backends import numpy_exec
from gpusim.dsl import ir


def _run(body, n=16, x_dtype="int32", y_dtype="fp32", x=None):
    xt, yt = ir.TensorArg("x", (n,), x_dtype), ir.TensorArg("y", (n,), y_dtype)
    prog = dsl.trace(body, "k", [xt, yt])
    wl = ir.Workload("k", {"x": xt, "y": yt}, ("x",), ("y",), (ir.Launch("k", prog, (1,), {"x": "x", "y": "y"}),))
    x = np.arange(n, dtype=numpy_exec.NP_DTYPE[x_dtype]) if x is None else x
    return numpy_exec.execute(wl, {"x": x})["y"]


def test_int_tile_times_float_constant_is_fp32_not_truncated():
    # the ALiBi bias: (j - i) * slope with an int32 index tile
    y = _run(lambda x, y: dsl.store(y, (0,), dsl.arange(0, 16) * -0.5))
    np.testing.assert_array_equal(y, np.arange(16) * -0.5)


def test_tile_equality_builds_a_mask():
    y = _run(lambda x, y: dsl.store(y, (0,), dsl.where(dsl.load(x, (0,), (16,)) == 3, 1.0, 0.0)))
    np.testing.assert_array_equal(y, (np.arange(16) == 3).astype(np.float32))
    y = _run(lambda x, y: dsl.store(y, (0,), dsl.where(dsl.load(x, (0,), (16,)) != 3, 1.0, 0.0)))
    assert y.sum() == 15


def test_abs_and_the_other_ir_ops_are_public():
    for name in ("abs", "log2", "rsqrt", "tmin", "exp", "exp2", "log", "sqrt", "tsum", "tmax", "where", "cast"):
        assert name in dsl.__all__ and callable(getattr(dsl, name))
    y = _run(lambda x, y: dsl.store(y, (0,), abs(dsl.load(x, (0,), (16,)) - 8)))
    np.testing.assert_array_equal(y, np.abs(np.arange(16) - 8))


@pytest.mark.parametrize("use", ["if", "and", "not", "while"])
def test_a_tile_in_a_python_bool_context_raises_with_file_and_line(use):
    def body(x, y):
        t = dsl.load(x, (0,), (16,))
        if use == "if":
            if t > 3:                                  # noqa: the error must point at this line
                pass
        elif use == "and":
            t > 3 and t < 9
        elif use == "not":
            not (t > 3)
        else:
            while t > 3:
                break

    with pytest.raises(dsl.TraceError, match=r"test_silent_failures\.py:\d+: a tile \(bool\[16\]\) has no single "
                                             r"truth value") as e:
        _run(body)
    line = int(str(e.value).split(":")[1])
    import inspect

    src, start = inspect.getsourcelines(body)
    assert "t > 3" in src[line - start]


def test_masks_only_combine_with_masks():
    with pytest.raises(dsl.TraceError, match=r"& combines masks.*got int32"):
        _run(lambda x, y: dsl.load(x, (0,), (16,)) & 1)
    with pytest.raises(dsl.TraceError, match="where: the condition must be a mask"):
        _run(lambda x, y: dsl.where(dsl.load(x, (0,), (16,)), 1.0, 0.0))


def test_loop_carried_type_change_is_an_error_not_a_silent_cast():
    def body(x, y):
        t = dsl.load(x, (0,), (16,))
        (t,) = dsl.loop(0, 2, 1, (t,), lambda i, c: (c * 0.5,))     # int32 -> fp32 would be truncated back
        dsl.store(y, (0,), t)

    with pytest.raises(dsl.TraceError, match="starts as int32 but the body returns fp32"):
        _run(body)


def test_fp16_division_is_fp32_as_in_triton():
    y = _run(lambda x, y: dsl.store(y, (0,), dsl.load(x, (0,), (16,)) / 3.0), x_dtype="fp16",
             x=np.full(16, 1.0, np.float16))
    np.testing.assert_array_equal(y, np.full(16, np.float32(1.0) / np.float32(3.0)))


def test_bf16_constants_are_rounded_like_triton_scalars():
    y = _run(lambda x, y: dsl.store(y, (0,), (dsl.load(x, (0,), (16,)) * (1 / math.sqrt(128))).to("fp32")),
             x_dtype="bf16", y_dtype="fp32", x=np.ones(16, np.float32))
    assert y[0] == numpy_exec.round_bf16(np.float32(1 / math.sqrt(128)))
