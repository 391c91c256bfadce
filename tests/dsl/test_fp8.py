"""fp8e4m3 / fp8e5m2 in the DSL: the rounding to the fp8 grid, Triton's promotion, the tile rules,
the dot mode and the Triton lowering's text."""
import math

import numpy as np
import pytest

from gpusim import dsl
from gpusim.backends.numpy_exec import round_fp8, to_dtype
from gpusim.dsl import dtypes, ir
from gpusim.dsl.rules import violations
from gpusim.toolchain.lower import lower

torch = pytest.importorskip("torch")
TORCH = {"fp8e4m3": torch.float8_e4m3fn, "fp8e5m2": torch.float8_e5m2}
FMT = {"fp8e4m3": (448.0, 2.0 ** -9), "fp8e5m2": (57344.0, 2.0 ** -16)}     # largest finite, smallest subnormal


def grid(dt):
    """Every finite value of the format, from torch's decoding of all 256 bytes."""
    v = torch.arange(256, dtype=torch.uint8).view(TORCH[dt]).float().numpy()
    return np.unique(v[np.isfinite(v)])


@pytest.mark.parametrize("dt", ["fp8e4m3", "fp8e5m2"])
def test_round_matches_torch_from_float32(dt):
    g = grid(dt)
    assert g.max() == FMT[dt][0] and g[g > 0].min() == FMT[dt][1]
    rng = np.random.default_rng(1)
    x = np.concatenate([g, (g[1:] + g[:-1]) / 2] + [rng.standard_normal(4000) * s for s in (1e-3, 1, 100)])
    x = x.astype(np.float32)           # torch rounds float32 directly (float64 it rounds through float32)
    ref = torch.from_numpy(x).to(TORCH[dt]).float().numpy()
    got = round_fp8(x, dt)
    np.testing.assert_array_equal(got, ref)          # ties to even included (the midpoints above)
    assert np.all(np.isin(got, g))
    assert [dtypes.round_fp8(float(a), dt) for a in x[::37]] == list(got[::37].astype(float))


@pytest.mark.parametrize("dt", ["fp8e4m3", "fp8e5m2"])
def test_saturates_and_keeps_nan(dt):
    vmax = FMT[dt][0]
    got = to_dtype(np.array([1e9, -1e9, np.inf, -np.inf, np.nan, vmax * 1.06, -0.0]), dt)
    assert list(got[:4]) == [vmax, -vmax, vmax, -vmax] and math.isnan(got[4]) and got[5] == vmax
    assert got.dtype == np.float32 and got[6] == 0.0
    assert dtypes.const_value(1e9, dt) == vmax and dtypes.const_value(-math.inf, dt) == -vmax


def test_e4m3_steps():
    """3 mantissa bits: 1 + 1/8 steps; ties to even; the smallest normal 2^-6, subnormals 2^-9 apart."""
    x = np.array([1.0625, 1.1875, 1.9375, 2 ** -6 + 2 ** -10, 3 * 2 ** -10, 2 ** -11])
    np.testing.assert_array_equal(round_fp8(x, "fp8e4m3"), [1.0, 1.25, 2.0, 2 ** -6, 2 ** -8, 0.0])


def test_promotion_follows_triton():
    tile = {d: ir.Value(0, (16,), d) for d in ("fp8e4m3", "fp8e5m2", "fp16", "bf16", "fp32", "int32")}
    p = dtypes.promote
    assert p(tile["fp8e4m3"], tile["fp8e4m3"]) == "fp8e4m3"
    assert p(tile["fp8e4m3"], tile["fp8e5m2"]) == "fp16"      # different fp8s: fp16 (rule 6)
    assert p(tile["fp8e4m3"], tile["fp16"]) == "fp16"
    assert p(tile["fp8e5m2"], tile["bf16"]) == "fp32"
    assert p(tile["fp8e4m3"], tile["fp32"]) == "fp32"
    assert p(tile["fp8e4m3"], 0.5) == "fp8e4m3"
    with pytest.raises(TypeError, match="fp8"):
        p(tile["fp8e4m3"], tile["int32"])


def test_dot_mode_is_tensor_for_same_fp8():
    assert dtypes.dot_mode("fp8e4m3", "fp8e4m3") == ("fp8e4m3", "tensor", None)
    assert dtypes.dot_mode("fp8e5m2", "fp8e5m2") == ("fp8e5m2", "tensor", None)
    assert dtypes.dot_mode("fp8e4m3", "fp8e5m2")[1] == "fma"
    assert ir.DTYPE_BYTES["fp8e4m3"] == ir.DTYPE_BYTES["fp8e5m2"] == 1


def _prog(body, k=32, dt="fp8e4m3"):
    a, b, c = ir.TensorArg("a", (64, k), dt), ir.TensorArg("b", (k, 64), dt), ir.TensorArg("c", (64, 64), "fp16")
    return dsl.trace(body, "p", [a, b, c], k=k)


def test_rules_fp8_dot_k_and_arithmetic():
    def dot_body(a, b, c, *, k):
        dsl.store(c, (0, 0), dsl.dot(dsl.load(a, (0, 0), (64, k)), dsl.load(b, (0, 0), (k, 64))))

    def arith_body(a, b, c, *, k):
        x = dsl.load(a, (0, 0), (64, 64))
        dsl.store(c, (0, 0), x * 2.0)

    def convert_body(a, b, c, *, k):
        x = dsl.load(a, (0, 0), (64, 64))
        dsl.store(c, (0, 0), x.to("fp16") * 2.0)

    assert violations(_prog(dot_body, 32)) == []
    (msg,) = violations(_prog(dot_body, 16))
    assert "fp8e4m3 operands with K = 16" in msg and ">= 32" in msg
    (msg,) = violations(_prog(arith_body, 64))
    assert "mul in fp8e4m3" in msg and ".to('fp16')" in msg
    assert violations(_prog(convert_body, 64)) == []


def test_lowering_text_names_triton_fp8_types():
    for dt, tl_name, args in (("fp8e4m3", "tl.float8e4nv", "3, -6, 448.0"), ("fp8e5m2", "tl.float8e5", "2, -14, 57344.0")):
        def body(a, b, c, *, k):
            acc = dsl.dot(dsl.load(a, (0, 0), (64, k)), dsl.load(b, (0, 0), (k, 64)))
            dsl.store(c, (0, 0), acc.to(dt).to("fp16"))

        prog = _prog(body, 32, dt)
        src = lower(prog, (1,))
        assert f"# a_ptr: {dt}[64, 32]" in src
        assert "tl.dot(v1, v2)" in src and "input_precision" not in src     # on the tensor cores
        assert f"v4 = v3.to({tl_name})" in src and "_fp8_round" not in src   # the GPU rounds (satfinite)
        interp = lower(prog, (1,), interpreter=True)
        assert f"v4 = _fp8_round(v3, {args}).to({tl_name})" in interp
