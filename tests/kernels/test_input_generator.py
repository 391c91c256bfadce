"""A kernel's own input generator (``@kernel(..., inputs=fn)``): attached to the workload, used by
numpy_exec.random_inputs and so by simulate(check=True), the Triton backends and the GPU harness;
attention_flash_bwd's feeds O and L from a float64 forward of the same Q, K, V."""
import os

import numpy as np
import pytest

DEVICE = os.environ.get("GPUSIM_TRITON_TEST_DEVICE", "cpu")
if DEVICE == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"     # must be set before triton is imported

import gpusim  # noqa: E402
from gpusim.backends import numpy_exec as ne  # noqa: E402
from gpusim.dsl import load, program_id, store, trace  # noqa: E402
from gpusim.dsl.ir import Launch, TensorArg, Workload  # noqa: E402
from gpusim.kernels import build, kernel  # noqa: E402
from gpusim.kernels.backward import flash_bwd_reference, forward64  # noqa: E402
from gpusim.kernels.elementwise import elementwise_body  # noqa: F401,E402

BWD = dict(batch=1, heads=2, seq_len=96, head_dim=32, BLOCK_M=32, BLOCK_N=16)


def _copy_body(x, y, *, B):
    i = program_id(0)
    store(y, (i * B,), load(x, (i * B,), (B,)) + 0.0)


def _copy_build(p):
    t = {"x": TensorArg("x", (64,), "fp32"), "y": TensorArg("y", (64,), "fp32")}
    prog = trace(_copy_body, "copy", [t["x"], t["y"]], num_warps=1, B=64)
    return Workload("copy", t, ("x",), ("y",), (Launch("copy", prog, (1,), {"x": "x", "y": "y"}),))


def test_generator_is_attached_and_used():
    calls = []

    def gen(wl, seed):
        calls.append((wl.name, seed))
        return {"x": np.full(64, 3.0 + seed)}

    k = kernel(name="copy_gen", reference=lambda x, p: {"y": x["x"]}, inputs=gen)(_copy_build)
    wl = k.build()
    x = ne.random_inputs(wl, 2)
    assert calls == [("copy", 2)] and x["x"].dtype == np.float32 and np.all(x["x"] == 5.0)
    assert ne.random_normal_inputs(wl, 2)["x"].std() > 0.5         # the generic draw stays available
    assert ne.check(wl, seed=1) == 0.0 and calls[-1] == ("copy", 1)
    plain = kernel(name="copy_plain", reference=lambda x, p: {"y": x["x"]})(_copy_build).build()
    assert plain.make_inputs is None and ne.random_inputs(plain, 2)["x"].std() > 0.5


def test_generator_errors_name_the_input():
    k = kernel(name="bad_gen", reference=lambda x, p: {"y": x["x"]}, inputs=lambda wl, s: {"x": np.zeros(3)})(_copy_build)
    with pytest.raises(ValueError, match="returned x of shape"):
        ne.random_inputs(k.build(), 0)
    k = kernel(name="bad_gen2", inputs=lambda wl, s: {})(_copy_build)
    with pytest.raises(ValueError, match="returned no x"):
        ne.random_inputs(k.build(), 0)
    with pytest.raises(TypeError):
        kernel(name="bad", inputs=3)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_bwd_inputs_are_the_forward(causal):
    wl = build("attention_flash_bwd", dict(BWD, causal=causal))
    x = ne.random_inputs(wl, 4)
    q, k, v = (x[n].astype(np.float64) for n in "qkv")
    o, lse = forward64(q, k, v, causal)
    assert np.array_equal(x["o"], o.astype(np.float16)) and np.array_equal(x["lse"], lse.astype(np.float32))
    # so the kernel's reference (from the given O, L) is the exact gradient of the attention
    ref = ne.reference(wl, x)
    exact = flash_bwd_reference({n: a.astype(np.float64) for n, a in x.items()}, wl.params)
    for n in wl.outputs:
        assert ne.max_rel_err(ref[n], exact[n]) < 2e-3
    assert ne.check(wl, seed=4) < 2e-3


@pytest.mark.parametrize("causal", [False, True])
def test_forward64_blocks_and_torch_agree(causal):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 100, 16)) for _ in range(3))
    a = forward64(q, k, v, causal)
    b = forward64(q, k, v, causal, block_elems=300)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)
    pytest.importorskip("torch")
    c = forward64(q, k, v, causal, device="cpu")
    for x, y in zip(a, c):      # float64 both, summed in another order (torch's blocking follows its thread count)
        np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-9)


def test_simulate_check_uses_the_generator():
    r = gpusim.simulate("attention_flash_bwd", "h200", check=True, causal=True, **BWD)
    assert r.max_rel_err < 2e-3


def test_big_inputs_drawn_in_parallel_chunks(monkeypatch):
    """Large inputs come from per-chunk streams: normal, deterministic, independent of the pool size."""
    wl = build("attention_decode", dict(batch=1, heads=2, kv_heads=1, kv_len=4096, head_dim=64, num_splits=2))
    monkeypatch.setattr(ne, "BIG_INPUT", 1 << 16)
    monkeypatch.setattr(ne, "_CHUNK", 1 << 14)
    a = ne.random_normal_inputs(wl, 3)
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    b = ne.random_normal_inputs(wl, 3)
    for n in wl.inputs:
        assert np.array_equal(a[n], b[n])
    assert abs(float(a["k"].astype(np.float64).std()) - 1.0) < 0.02 and not np.array_equal(a["k"], a["v"])


@pytest.mark.parametrize("causal", [False, True])
def test_flash_bwd_generator_in_triton_interpreter(causal):
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    from gpusim.backends.triton import run as tb

    wl = build("attention_flash_bwd", dict(BWD, causal=causal))
    x = ne.random_inputs(wl, 1)
    out = tb.run_workload(wl, x, device=DEVICE)
    exact = flash_bwd_reference({n: a.astype(np.float64) for n, a in x.items()}, wl.params)
    for n in wl.outputs:
        assert ne.max_rel_err(out[n], exact[n]) < 5e-3
