"""The numpy executor is the specification: flash == naive == float64 softmax(QK^T/sqrt(d))V."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpusim.backends import numpy_exec
from gpusim.kernels import build

TOL = 2e-3


def _run(kernel, inputs, **p):
    w = build(kernel, p)
    return numpy_exec.execute(w, inputs), w


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seq_len=st.integers(1, 200), head_dim=st.sampled_from([16, 32, 40, 64]), heads=st.integers(1, 2),
       block_m=st.sampled_from([16, 32, 64]), block_n=st.sampled_from([16, 32, 64]), causal=st.booleans(),
       seed=st.integers(0, 10_000))
def test_flash_matches_naive_and_float64(seq_len, head_dim, heads, block_m, block_n, causal, seed):
    p = dict(batch=1, heads=heads, seq_len=seq_len, head_dim=head_dim, BLOCK_M=block_m, BLOCK_N=block_n, causal=causal)
    wf = build("attention_flash", p)
    inputs = numpy_exec.random_inputs(wf, seed)
    flash = numpy_exec.execute(wf, inputs)["o"]
    ref = numpy_exec.reference(wf, inputs)["o"]
    assert numpy_exec.max_rel_err(flash, ref) <= TOL
    if not causal:
        naive, _ = _run("attention_naive", inputs, **{k: v for k, v in p.items() if k not in ("BLOCK_M", "BLOCK_N", "causal")})
        assert numpy_exec.max_rel_err(flash, naive["o"].astype(np.float64)) <= TOL
        assert numpy_exec.max_rel_err(naive["o"], ref) <= TOL


@pytest.mark.parametrize("dtype,tol", [("fp16", 2e-3), ("bf16", 1.6e-2), ("fp32", 1e-5)])
def test_dtypes(dtype, tol):
    w = build("attention_flash", dict(batch=1, heads=2, seq_len=130, head_dim=32, BLOCK_M=32, BLOCK_N=32, dtype=dtype))
    assert numpy_exec.check(w, seed=3) <= tol


def test_naive_intermediates_are_materialised():
    w = build("attention_naive", dict(batch=1, heads=1, seq_len=70, head_dim=16))
    inputs = numpy_exec.random_inputs(w, 1)
    mem = numpy_exec.execute(w, inputs)
    q, k = (inputs[n].astype(np.float64) for n in ("q", "k"))
    s = q @ np.swapaxes(k, -1, -2)
    assert numpy_exec.max_rel_err(mem["s"], s) < 2e-3
    assert numpy_exec.max_rel_err(mem["s2"], s / 4.0) < 2e-3
    np.testing.assert_allclose(mem["p"].astype(np.float64).sum(-1), 1.0, atol=5e-3)


@pytest.mark.parametrize("kernel,p", [("elementwise_chain", dict(n=3000, BLOCK=256)),
                                      ("elementwise_fused", dict(n=3001, BLOCK=512)),
                                      ("matmul", dict(M=100, N=72, K=90, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32))])
def test_other_kernels(kernel, p):
    assert numpy_exec.check(build(kernel, p), seed=5) <= 2e-3


def test_unwritten_output_is_caught():
    """Outputs start as NaN: a kernel that forgets a tile cannot pass the check."""
    w = build("elementwise_fused", dict(n=2048, BLOCK=1024))
    import dataclasses

    short = dataclasses.replace(w.launches[0], grid=(1,))
    w2 = dataclasses.replace(w, launches=(short,))
    mem = numpy_exec.execute(w2, numpy_exec.random_inputs(w2))
    assert numpy_exec.max_rel_err(mem["y"], numpy_exec.reference(w2, numpy_exec.random_inputs(w2))["y"]) == float("inf")
