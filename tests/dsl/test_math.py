"""The DSL's math beyond exp: exact on numpy against float64, lowered to Triton, costed from its
SASS; gelu/silu; numpy ufuncs and math.* on a tile fail at trace time naming the DSL function;
the soft-capping (tanh) and SwiGLU (silu) example kernels are exact on numpy and in the interpreter."""
import math
import os
from pathlib import Path

import numpy as np
import pytest

DEVICE = os.environ.get("GPUSIM_TRITON_TEST_DEVICE", "cpu")
if DEVICE == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"     # must be set before triton is imported

from gpusim import dsl  # noqa: E402
from gpusim.backends import numpy_exec  # noqa: E402
from gpusim.backends.sim.cost import op_cost  # noqa: E402
from gpusim.toolchain.lower import lower  # noqa: E402
from gpusim.dsl import ir  # noqa: E402
from gpusim.hardware import load_gpu  # noqa: E402
from gpusim.kernels import resolve_kernel  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
N = 256
_erf64 = np.vectorize(math.erf)
REF = {"tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "erf": _erf64, "sin": np.sin, "cos": np.cos,
       "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "abs": np.abs, "exp": np.exp,
       "gelu": lambda x: 0.5 * x * (1 + _erf64(x / np.sqrt(2))),
       "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
       "silu": lambda x: x / (1 + np.exp(-x))}
REF_1ULP = ("log", "sqrt", "rsqrt", "abs", "exp")
DSL = {k: getattr(dsl, k, None) for k in REF}
DSL["gelu_tanh"] = lambda t: dsl.gelu(t, approximate="tanh")


def _workload(fn, dtype="fp32"):
    a, y = ir.TensorArg("a", (N,), dtype), ir.TensorArg("y", (N,), "fp32")
    prog = dsl.trace(lambda a, y: dsl.store(y, (0,), fn(dsl.load(a, (0,), (N,)))), "m", [a, y])
    return ir.Workload("m", {"a": a, "y": y}, ("a",), ("y",), (ir.Launch("m", prog, (1,), {"a": "a", "y": "y"}),),
                       {"dtype": dtype})


def _x(name):
    x = np.random.default_rng(0).standard_normal(N) * 3
    x[:4] = [0.0, 1e-4, -1e-3, 0.1]                           # tanh/erf/sin near 0: relative accuracy
    if name in ("log", "sqrt", "rsqrt"):
        x = np.abs(x) + 0.01
    return x.astype(np.float32)


@pytest.mark.parametrize("name", list(REF))
def test_exact_vs_float64(name):
    x = _x(name)
    got = numpy_exec.execute(_workload(DSL[name]), {"a": x})["y"]
    want = REF[name](x.astype(np.float64))
    # the new functions are computed in float64 and rounded once (half an fp32 ulp); numpy's fp32
    # exp/log/sqrt within one ulp; gelu/silu are a few fp32 ops (1 + tanh cancels for x << 0: atol)
    rtol = 2 ** -24 if name in ("tanh", "sigmoid", "erf", "sin", "cos") else 2 ** -22 if name in REF_1ULP else 2 ** -20
    atol = 1e-6 if name.startswith("gelu") else 0
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=atol)


def test_lowering_text():
    src = lower(_workload(lambda t: dsl.tanh(t) + dsl.sigmoid(t) + dsl.erf(t) + dsl.sin(t) + dsl.cos(t),
                          "fp16").launches[0].program)
    for call in ("_tanh(", "tl.sigmoid(", "tl.erf(", "tl.sin(", "tl.cos("):
        assert call in src, call
    assert "from triton.language.extra.cuda.libdevice import tanh as _tanh" in src
    src_i = lower(_workload(dsl.tanh).launches[0].program, interpreter=True)
    assert "def _tanh(x):" in src_i and "libdevice" not in src_i
    assert "_tanh" not in lower(_workload(dsl.exp).launches[0].program)     # other kernels unchanged


def test_cost_from_sass():
    cfg = load_gpu("h100")
    costs = {}
    for name in ("exp", "tanh", "sigmoid", "erf", "sin"):
        op = next(o for o in ir.walk(_workload(DSL[name]).launches[0].program.body) if isinstance(o, ir.Unary))
        costs[name] = op_cost(op, cfg, 4)
    assert costs["tanh"].sfu_ops == costs["sigmoid"].sfu_ops == 2 * N      # MUFU.EX2 + MUFU.RCP
    assert costs["erf"].sfu_ops == N and costs["sin"].sfu_ops == 0         # sinf: FMA range reduction, no MUFU
    assert costs["exp"].simt_cycles < costs["tanh"].simt_cycles < costs["sin"].simt_cycles


def test_numpy_ufunc_is_a_trace_error():
    with pytest.raises(dsl.TraceError, match=r"test_math\.py:\d+: .*np\.tanh.*gpusim\.dsl\.tanh"):
        _workload(np.tanh)
    with pytest.raises(dsl.TraceError, match=r"test_math\.py:\d+: .*math\.\*.*tanh"):
        _workload(math.tanh)
    with pytest.raises(dsl.TraceError, match="no such function"):
        _workload(np.arctan)
    x = np.random.default_rng(1).standard_normal(N).astype(np.float32)    # numpy scalars still combine
    got = numpy_exec.execute(_workload(lambda t: np.float32(2.0) * t - np.float32(1.0)), {"a": x})["y"]
    np.testing.assert_array_equal(got, 2 * x - 1)


EXAMPLES = [("scenarios/kernels/softcap.py:softcap", dict(rows=7, cols=300, cap=5.0)),
            ("scenarios/kernels/swiglu.py:swiglu", dict(rows=5, cols=300))]


@pytest.mark.parametrize("name, params", EXAMPLES)
def test_examples_exact_on_numpy(name, params):
    wl = resolve_kernel(name, base_dir=REPO).build(dict(params, dtype="fp16"))
    assert numpy_exec.check(wl, seed=1) <= 2e-3


@pytest.mark.slow     # the first interpreted kernel imports torch and triton: about 2 s
@pytest.mark.parametrize("name, params", EXAMPLES)
def test_examples_in_triton_interpreter(name, params):
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    from gpusim.backends.triton import run as tb
    wl = resolve_kernel(name, base_dir=REPO).build(dict(params, dtype="fp32"))
    x = numpy_exec.random_inputs(wl, seed=2)
    np.testing.assert_allclose(tb.run_workload(wl, x, device=DEVICE)["y"], numpy_exec.execute(wl, x)["y"],
                               rtol=1e-5, atol=1e-6)
