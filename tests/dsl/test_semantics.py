"""The DSL follows Triton's semantics, and every IR op works on every backend.

Each case traces a one-op kernel, checks the dtype Triton's rules give, runs it exactly on numpy
against an independent numpy expression, costs it with the timing model's ``op_cost`` (and
simulates the whole program), and runs the generated Triton code in the interpreter
(``TRITON_INTERPRET=1``), which must reproduce numpy. ``test_every_ir_op_has_a_case`` fails
when an IR op class or op name is added without a case here.
"""
import math
import os

import numpy as np
import pytest

DEVICE = os.environ.get("GPUSIM_TRITON_TEST_DEVICE", "cpu")
if DEVICE == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"     # must be set before triton is imported

from gpusim import dsl  # noqa: E402
from gpusim.api import simulate_workload  # noqa: E402
from gpusim.backends import numpy_exec  # noqa: E402
from gpusim.backends.sim.cost import op_cost  # noqa: E402
from gpusim.dsl import ir  # noqa: E402
from gpusim.hardware import load_gpu  # noqa: E402

N = 16
D = dsl


def _c(name, a_dt, b_dt, y_dt, fn, expect, y_shape=(N,), shape=(N,), inputs="any"):
    return name, dict(a_dt=a_dt, b_dt=b_dt, y_dt=y_dt, fn=fn, expect=expect, y_shape=y_shape, shape=shape,
                      inputs=inputs)


f32, f16, bf, i32 = np.float32, np.float16, "bf16", np.int32
M2 = (N, N)
CASES = dict([
    # promotion (Triton's computation_type_impl)
    _c("int32*0.5 -> fp32", "int32", "int32", "fp32", lambda a, b: a * 0.5, lambda a, b: a.astype(f32) * f32(0.5)),
    _c("fp16*1.5 -> fp16", "fp16", "fp16", "fp16", lambda a, b: a * 1.5, lambda a, b: a * f16(1.5)),
    _c("fp16+fp32 -> fp32", "fp16", "fp32", "fp32", lambda a, b: a + b, lambda a, b: a.astype(f32) + b),
    _c("bf16+fp16 -> fp16", "bf16", "fp16", "fp16", lambda a, b: a + b,
       lambda a, b: (a.astype(f16) + b)),
    _c("bf16*bf16 -> bf16", "bf16", "bf16", "bf16", lambda a, b: a * b,
       lambda a, b: numpy_exec.round_bf16(a * b)),
    _c("int32+3 -> int32", "int32", "int32", "int32", lambda a, b: a + 3, lambda a, b: a + i32(3)),
    _c("int32-int32 -> int32", "int32", "int32", "int32", lambda a, b: a - b, lambda a, b: a - b),
    _c("int32/int32 -> fp32", "int32", "int32", "fp32", lambda a, b: a / b, lambda a, b: a.astype(f32) / b.astype(f32),
       inputs="nonzero"),
    _c("fp16/2 -> fp32", "fp16", "fp16", "fp32", lambda a, b: a / 2, lambda a, b: a.astype(f32) / f32(2)),
    _c("0.25-bf16 -> bf16", "bf16", "bf16", "bf16", lambda a, b: 0.25 - a, lambda a, b: numpy_exec.round_bf16(0.25 - a)),
    _c("maximum", "fp32", "fp32", "fp32", lambda a, b: D.maximum(a, b), np.maximum),
    _c("minimum int", "int32", "int32", "int32", lambda a, b: D.minimum(a, b), np.minimum),
    # comparisons make masks
    _c("lt", "fp32", "fp32", "bool", lambda a, b: a < b, np.less),
    _c("le", "int32", "int32", "bool", lambda a, b: a <= b, np.less_equal),
    _c("gt 0.5", "int32", "int32", "bool", lambda a, b: a > 0.5, lambda a, b: a > 0.5),
    _c("ge", "fp16", "fp32", "bool", lambda a, b: a >= b, lambda a, b: a.astype(f32) >= b),
    _c("eq 3", "int32", "int32", "bool", lambda a, b: a == 3, lambda a, b: a == 3),
    _c("ne", "int32", "int32", "bool", lambda a, b: a != b, np.not_equal),
    _c("and", "int32", "int32", "bool", lambda a, b: (a > 0) & (b > 0), lambda a, b: (a > 0) & (b > 0)),
    _c("or", "int32", "int32", "bool", lambda a, b: (a > 0) | (b > 0), lambda a, b: (a > 0) | (b > 0)),
    _c("not", "int32", "int32", "bool", lambda a, b: ~(a > 0), lambda a, b: ~(a > 0)),
    # unary
    _c("neg", "fp16", "fp16", "fp16", lambda a, b: -a, np.negative),
    _c("abs int", "int32", "int32", "int32", lambda a, b: abs(a), lambda a, b: np.abs(a)),
    _c("abs fp32", "fp32", "fp32", "fp32", lambda a, b: D.abs(a), lambda a, b: np.abs(a)),
    _c("exp", "fp32", "fp32", "fp32", lambda a, b: D.exp(a), lambda a, b: np.exp(a)),
    _c("exp2 fp16", "fp16", "fp16", "fp32", lambda a, b: D.exp2(a), lambda a, b: np.exp2(a.astype(f32))),
    _c("log", "fp32", "fp32", "fp32", lambda a, b: D.log(a), lambda a, b: np.log(a), inputs="positive"),
    _c("log2", "fp32", "fp32", "fp32", lambda a, b: D.log2(a), lambda a, b: np.log2(a), inputs="positive"),
    _c("sqrt", "fp32", "fp32", "fp32", lambda a, b: D.sqrt(a), lambda a, b: np.sqrt(a), inputs="positive"),
    _c("rsqrt", "fp32", "fp32", "fp32", lambda a, b: D.rsqrt(a), lambda a, b: 1 / np.sqrt(a), inputs="positive"),
    # math beyond exp/log: fp32 result, reference computed in float64
    _c("tanh", "fp32", "fp32", "fp32", lambda a, b: D.tanh(a), lambda a, b: np.tanh(a.astype(np.float64))),
    _c("sigmoid fp16", "fp16", "fp16", "fp32", lambda a, b: D.sigmoid(a),
       lambda a, b: 1 / (1 + np.exp(-a.astype(np.float64)))),
    _c("erf", "fp32", "fp32", "fp32", lambda a, b: D.erf(a),
       lambda a, b: np.array([math.erf(v) for v in a.astype(np.float64)])),
    _c("sin", "fp32", "fp32", "fp32", lambda a, b: D.sin(a), lambda a, b: np.sin(a.astype(np.float64))),
    _c("cos", "fp32", "fp32", "fp32", lambda a, b: D.cos(a), lambda a, b: np.cos(a.astype(np.float64))),
    # where, cast
    _c("where int/float", "int32", "int32", "fp32", lambda a, b: D.where(a > b, a, 0.5),
       lambda a, b: np.where(a > b, a.astype(f32), f32(0.5))),
    _c("where fp16/-inf", "fp16", "fp16", "fp16", lambda a, b: D.where(a > b, a, -math.inf),
       lambda a, b: np.where(a > b, a, f16(-np.inf))),
    _c("cast fp32->int32", "fp32", "fp32", "int32", lambda a, b: (a * 3.0).to("int32"),
       lambda a, b: (a * f32(3)).astype(i32)),
    _c("cast int32->fp16", "int32", "int32", "fp16", lambda a, b: D.cast(a, "fp16"), lambda a, b: a.astype(f16)),
    # reductions (2-d tiles)
    _c("sum", "fp32", "fp32", "fp32", lambda a, b: D.tsum(a, 1), lambda a, b: a.sum(1, dtype=f32), (N,), M2),
    _c("max", "fp16", "fp16", "fp32", lambda a, b: D.tmax(a, 0), lambda a, b: a.astype(f32).max(0), (N,), M2),
    _c("min", "fp32", "fp32", "fp32", lambda a, b: D.tmin(a, 1), lambda a, b: a.min(1), (N,), M2),
    _c("sum int", "int32", "int32", "int32", lambda a, b: D.tsum(a, 1), lambda a, b: a.sum(1).astype(i32), (N,), M2),
    _c("sum mask", "int32", "int32", "int32", lambda a, b: D.tsum(a > 0, 1), lambda a, b: (a > 0).sum(1), (N,), M2),
    # the structural ops
    _c("full+iota+expand", "int32", "int32", "int32",
       lambda a, b: D.arange(2, N, M2, axis=1) + D.full((N,), 1, "int32")[:, None] + a,
       lambda a, b: np.arange(2, N + 2, dtype=i32)[None, :] + 1 + a, M2, M2),
    _c("dot+trans", "fp16", "fp16", "fp32", lambda a, b: D.dot(a, D.trans(b)), lambda a, b: a.astype(f32) @ b.T.astype(f32),
       M2, M2),
    _c("loop", "fp32", "fp32", "fp32",
       lambda a, b: D.loop(0, 3, 1, (a,), lambda i, t: (t * 0.5 + b,))[0],
       lambda a, b: ((a * f32(0.5) + b) * f32(0.5) + b) * f32(0.5) + b),
])


def _program(case):
    a = ir.TensorArg("a", case["shape"], case["a_dt"])
    b = ir.TensorArg("b", case["shape"], case["b_dt"])
    y = ir.TensorArg("y", case["y_shape"], case["y_dt"])
    got = {}

    def body(a, b, y):
        zero = (0,) * len(case["shape"])
        r = case["fn"](D.load(a, zero, case["shape"]), D.load(b, zero, case["shape"]))
        got["dtype"] = r.dtype
        D.store(y, (0,) * len(case["y_shape"]), r)

    prog = D.trace(body, "op", [a, b, y])
    wl = ir.Workload("op", {"a": a, "b": b, "y": y}, ("a", "b"), ("y",), (ir.Launch("op", prog, (1,), {
        "a": "a", "b": "b", "y": "y"}),), {"dtype": "fp32"})
    return wl, got["dtype"]


def _inputs(case, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for name in ("a", "b"):
        dt = case[f"{name}_dt"]
        if dt == "int32":
            x = rng.integers(-5, 6, case["shape"]).astype(np.int32)
            if case["inputs"] == "nonzero":
                x[x == 0] = 7
        else:
            x = rng.standard_normal(case["shape"]) * 2
            if case["inputs"] == "positive":
                x = np.abs(x) + 0.25
            x = numpy_exec.to_dtype(x, dt)
        out[name] = x
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_numpy_semantics(name):
    case = CASES[name]
    wl, dtype = _program(case)
    assert dtype == case["y_dt"], f"{name}: result dtype {dtype}, Triton gives {case['y_dt']}"
    x = _inputs(case)
    got = numpy_exec.execute(wl, x)["y"]
    want = numpy_exec.to_dtype(np.asarray(case["expect"](x["a"], x["b"])), case["y_dt"])
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-6, atol=0)


@pytest.mark.parametrize("name", list(CASES))
def test_sim_cost(name):
    wl, _ = _program(CASES[name])
    cfg = load_gpu("h100")
    for op in ir.walk(wl.launches[0].program.body):
        if isinstance(op, (ir.Binary, ir.Unary, ir.Where, ir.Reduce, ir.Dot)):
            c = op_cost(op, cfg, 4)
            assert c.simt_cycles + c.tensor_cycles + c.sfu_cycles > 0, f"{name}: {type(op).__name__} costs nothing"
    r = simulate_workload(wl, cfg, check=False)
    assert r.status == "ok" and r.time_us > 0


@pytest.mark.parametrize("name", list(CASES))
def test_triton_interpreter(name):
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    from gpusim.backends.triton import run as tb

    case = CASES[name]
    wl, _ = _program(case)
    x = _inputs(case)
    want = numpy_exec.execute(wl, x)["y"]
    got = tb.run_workload(wl, x, device=DEVICE)["y"]
    assert got.dtype == want.dtype
    rtol = 1e-6 if case["y_dt"] != "bf16" else 2 ** -7     # interpreter truncates fp32 -> bf16 (one ulp)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=0)


def test_every_ir_op_has_a_case():
    seen = set()
    for case in CASES.values():
        wl, _ = _program(case)
        for op in ir.walk(wl.launches[0].program.body):
            seen.add(type(op).__name__)
            if isinstance(op, (ir.Binary, ir.Unary, ir.Reduce)):
                seen.add(f"{type(op).__name__}.{op.op}")
    wanted = {c.__name__ for c in ir.OPS}
    wanted |= {f"Binary.{o}" for o in ir.ELEMENTWISE_BINARY} | {f"Unary.{o}" for o in ir.ELEMENTWISE_UNARY}
    wanted |= {f"Reduce.{o}" for o in ir.REDUCTIONS}
    assert not wanted - seen, f"IR ops without a backend test case: {sorted(wanted - seen)}"
