"""attention_flash with shared K/V heads (kv_heads) and a sliding window: exact against float64,
and the simulator charges only the key blocks inside the band."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpusim
from gpusim.backends import numpy_exec as ne
from gpusim.toolchain.lower import lower
from gpusim.dsl import ir
from gpusim.kernels import build


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seq_len=st.integers(1, 150), kv_heads=st.sampled_from([1, 2, 4]), window=st.integers(0, 160),
       causal=st.booleans(), block_m=st.sampled_from([16, 32, 64]), block_n=st.sampled_from([16, 32, 64]),
       head_dim=st.sampled_from([16, 40]), seed=st.integers(0, 10_000))
def test_gqa_window_matches_float64(seq_len, kv_heads, window, causal, block_m, block_n, head_dim, seed):
    w = build("attention_flash", dict(batch=1, heads=4, kv_heads=kv_heads, window=window, causal=causal,
                                      seq_len=seq_len, head_dim=head_dim, BLOCK_M=block_m, BLOCK_N=block_n))
    assert ne.check(w, seed) <= 2e-3


@pytest.mark.parametrize("dtype,tol", [("bf16", 1.6e-2), ("fp32", 1e-5)])
def test_dtypes(dtype, tol):
    w = build("attention_flash", dict(batch=2, heads=4, kv_heads=2, window=24, causal=True, seq_len=90, head_dim=32,
                                      BLOCK_M=32, BLOCK_N=16, dtype=dtype))
    assert ne.check(w, seed=4) <= tol


def test_grouped_heads_share_kv():
    """Query heads 2h and 2h+1 of a batch read K/V head h: same as plain attention with K/V repeated."""
    p = dict(batch=2, heads=4, seq_len=40, head_dim=16, BLOCK_M=16, BLOCK_N=16, dtype="fp32")
    g = build("attention_flash", dict(p, kv_heads=2))
    assert g.tensors["k"].shape == (4, 40, 16) and g.tensors["q"].shape == (8, 40, 16)
    x = ne.random_inputs(g, 0)
    full = build("attention_flash", p)
    rep = {"q": x["q"], "k": np.repeat(x["k"], 2, axis=0), "v": np.repeat(x["v"], 2, axis=0)}
    np.testing.assert_allclose(ne.execute(g, x)["o"], ne.execute(full, rep)["o"], rtol=1e-6, atol=1e-6)


def test_defaults_leave_the_kernel_unchanged():
    base = dict(batch=1, heads=4, seq_len=200, head_dim=40, causal=True)
    a = build("attention_flash", base).launches[0]
    b = build("attention_flash", dict(base, kv_heads=4, window=0)).launches[0]
    assert lower(a.program, a.grid) == lower(b.program, b.grid) and a.program.meta == b.program.meta


def test_bad_values_are_errors():
    with pytest.raises(ValueError, match="kv_heads must divide heads"):
        build("attention_flash", dict(heads=16, kv_heads=3))
    with pytest.raises(ValueError, match="window must be"):
        build("attention_flash", dict(window=-1))
    r = gpusim.simulate("attention_flash", "h200", heads=16, kv_heads=5)
    assert r.status == "error" and "kv_heads" in r.reason


@pytest.mark.parametrize("causal", [True, False])
def test_window_charges_only_the_band(causal):
    """Local attention: each query block visits the ceil((BLOCK_M + W - 1) / BLOCK_N) + 1 key blocks
    at most that meet its band, so the matmul work grows as N W, not N^2."""
    n, bm, bn, win = 4096, 64, 64, 256
    p = dict(batch=1, heads=8, seq_len=n, head_dim=64, BLOCK_M=bm, BLOCK_N=bn, causal=causal)
    full = gpusim.simulate("attention_flash", "h200", check=False, **p)
    local = gpusim.simulate("attention_flash", "h200", check=False, window=win, **p)
    blocks = 0
    for m in range(n // bm):
        lo = max(0, m * bm - (win - 1)) // bn * bn
        hi = min(n, (m + 1) * bm) if causal else min(n, (m + 1) * bm + win - 1)
        blocks += -(-(hi - lo) // bn)
    per_block = 2 * 2 * bm * bn * 64 * 8            # two matmuls of BLOCK_M x BLOCK_N x d, 8 heads
    assert local.tensor_flops == blocks * per_block
    assert local.tensor_flops < full.tensor_flops / 5
    assert local.time_us < full.time_us / 3


def test_gqa_reads_kv_once_per_kv_head():
    p = dict(batch=1, heads=32, seq_len=2048, head_dim=128, BLOCK_M=128, BLOCK_N=64)
    mha = gpusim.simulate("attention_flash", "h200", check=False, **p)
    gqa = gpusim.simulate("attention_flash", "h200", check=False, kv_heads=4, **p)
    qo = 2 * 32 * 2048 * 128 * 2
    assert mha.dram_read_bytes == pytest.approx(qo / 2 + 2 * qo / 2, rel=0.02)
    assert gqa.dram_read_bytes == pytest.approx(qo / 2 + 2 * qo / 2 / 8, rel=0.02)
    assert gqa.l2_read_bytes == pytest.approx(mha.l2_read_bytes, rel=0.01)   # the SMs still load every tile
