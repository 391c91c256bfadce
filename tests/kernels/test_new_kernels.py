"""attention_decode, attention_flash_bwd, softmax, layernorm and rmsnorm on the numpy executor
against float64, and the traffic and FLOPs the simulator charges them."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpusim
from gpusim.backends import numpy_exec as ne
from gpusim.kernels import KernelParamError, build
from gpusim.kernels.backward import flash_bwd_inputs, flash_bwd_reference

TOL = {"fp16": 2e-3, "bf16": 1.6e-2, "fp32": 1e-5}


def _err(w, inputs, names=None):
    mem = ne.execute(w, inputs)
    ref = ne.reference(w, inputs)
    return max(ne.max_rel_err(mem[n], ref[n]) for n in (names or w.outputs))


# --------------------------------------------------------------------------- row kernels
@pytest.mark.parametrize("kernel", ["softmax", "layernorm", "rmsnorm"])
@pytest.mark.parametrize("cols,block", [(100, 0), (256, 0), (300, 64), (1000, 128)])
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_row_kernels_match_float64(kernel, cols, block, dtype):
    w = build(kernel, dict(rows=5, cols=cols, BLOCK=block, dtype=dtype))
    assert ne.check(w, seed=cols) <= TOL[dtype]


def test_row_block_whole_row_when_it_fits():
    w = build("softmax", dict(rows=2, cols=3000))
    assert w.launches[0].program.meta["BLOCK"] == 4096
    loops = [op for op in w.launches[0].program.body if type(op).__name__ == "Loop"]
    assert not loops
    big = build("softmax", dict(rows=2, cols=100_000, num_warps=4))
    assert big.launches[0].program.meta["BLOCK"] == 8192          # 32 x 4 warps x 64 registers
    assert sum(type(op).__name__ == "Loop" for op in big.launches[0].program.body) == 2


def test_layernorm_uses_weight_and_bias_and_eps():
    w = build("layernorm", dict(rows=3, cols=64, eps=0.5, dtype="fp32"))
    x = ne.random_inputs(w, 0)
    x["w"] = np.full(64, 2.0, np.float32)
    x["b"] = np.full(64, -1.0, np.float32)
    y = ne.execute(w, x)["y"].astype(np.float64)
    xr = x["x"].astype(np.float64)
    xc = xr - xr.mean(-1, keepdims=True)
    np.testing.assert_allclose(y, 2.0 * xc / np.sqrt(xc.var(-1, keepdims=True) + 0.5) - 1.0, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kernel,passes", [("softmax", 2), ("layernorm", 3), ("rmsnorm", 2)])
def test_streamed_rows_read_x_once_per_pass(kernel, passes):
    """One tile per row: x crosses L2 -> SM once. Streamed: once per pass (the re-reads hit the L2)."""
    p = dict(rows=264, cols=4096, dtype="fp16")
    x_bytes = 264 * 4096 * 2
    one = gpusim.simulate(kernel, "h200", check=False, **p)
    many = gpusim.simulate(kernel, "h200", check=False, BLOCK=1024, **p)
    vec = 4096 * 2 * {"softmax": 0, "layernorm": 2, "rmsnorm": 1}[kernel]     # w (and b), read by every row
    assert one.l2_read_bytes == pytest.approx(x_bytes + 264 * vec, rel=0.01)
    assert many.l2_read_bytes == pytest.approx(passes * x_bytes + 264 * vec, rel=0.01)
    assert many.dram_read_bytes == pytest.approx(x_bytes, rel=0.05)
    assert one.dram_write_bytes == many.dram_write_bytes == x_bytes


# --------------------------------------------------------------------------- decode
DECODE = [dict(batch=2, heads=4, kv_heads=2, q_len=1, kv_len=300, head_dim=64, num_splits=4),
          dict(batch=1, heads=4, kv_heads=1, q_len=3, kv_len=200, head_dim=32, num_splits=3),
          dict(batch=1, heads=2, kv_heads=0, q_len=16, kv_len=40, head_dim=40, num_splits=8),   # last split masked
          dict(batch=1, heads=8, kv_heads=1, q_len=5, kv_len=130, head_dim=16, num_splits=2, causal=False),
          dict(batch=1, heads=32, kv_heads=1, q_len=8, kv_len=70, head_dim=16, num_splits=1)]   # 2 row blocks


@pytest.mark.parametrize("p", DECODE, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_decode_matches_float64(p, dtype):
    w = build("attention_decode", dict(p, BLOCK_N=32, dtype=dtype))
    assert ne.check(w, seed=2) <= TOL[dtype]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kv_len=st.integers(16, 300), q_len=st.integers(1, 16), group=st.sampled_from([1, 2, 4]),
       splits=st.integers(1, 9), block_n=st.sampled_from([16, 32, 64]), causal=st.booleans(),
       seed=st.integers(0, 1000))
def test_decode_any_split(kv_len, q_len, group, splits, block_n, causal, seed):
    q_len = min(q_len, kv_len)
    w = build("attention_decode", dict(batch=1, heads=2 * group, kv_heads=2, q_len=q_len, kv_len=kv_len,
                                       head_dim=16, num_splits=splits, BLOCK_N=block_n, causal=causal))
    assert ne.check(w, seed) <= 2e-3


def test_decode_query_layout_is_batch_heads_qlen():
    """q, o of shape (batch * kv_heads, group * q_len, d) are the memory of (batch, heads, q_len, d)."""
    p = dict(batch=2, heads=4, kv_heads=2, q_len=3, kv_len=50, head_dim=16, num_splits=2, dtype="fp32")
    w = build("attention_decode", p)
    x = ne.random_inputs(w, 0)
    o = ne.execute(w, x)["o"].reshape(2, 4, 3, 16)
    q = x["q"].reshape(2, 4, 3, 16)
    k, v = x["k"].reshape(2, 2, 50, 16), x["v"].reshape(2, 2, 50, 16)
    b, h = 1, 3                                      # query head 3 uses KV head 1
    s = q[b, h].astype(np.float64) @ k[b, 1].T.astype(np.float64) / 4.0
    s = np.where(np.arange(50)[None, :] <= 47 + np.arange(3)[:, None], s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(o[b, h], (e / e.sum(-1, keepdims=True)) @ v[b, 1], rtol=1e-4, atol=1e-5)


def test_decode_bad_shapes_are_one_line_errors():
    with pytest.raises(ValueError, match="multiple of kv_heads"):
        build("attention_decode", dict(heads=6, kv_heads=4))
    with pytest.raises(ValueError, match="cannot exceed kv_len"):
        build("attention_decode", dict(q_len=8, kv_len=4))
    with pytest.raises(KernelParamError, match="q_len"):
        build("attention_decode", dict(q_len=17))


def test_decode_splits_and_gqa_traffic():
    """The KV cache crosses HBM once per KV head (query heads of a group share the tile), and
    splitting the sequence fills the SMs that one CTA per (batch, KV head) would leave idle."""
    p = dict(batch=1, heads=32, kv_heads=8, q_len=1, kv_len=32768, head_dim=128)
    kv_bytes = 2 * 8 * 32768 * 128 * 2
    one = gpusim.simulate("attention_decode", "h200", check=False, num_splits=1, **p)
    many = gpusim.simulate("attention_decode", "h200", check=False, num_splits=16, **p)
    assert [k.launch for k in many.kernels] == ["decode_split", "decode_combine"]
    assert many.launch("decode_split").grid == (16, 8, 1)
    for r in (one, many):
        assert r.launch("decode_split").dram_read_bytes == pytest.approx(kv_bytes, rel=0.01)
    assert many.time_us < one.time_us / 3


# --------------------------------------------------------------------------- FlashAttention-2 backward
BWD = [dict(seq_len=100, head_dim=32, BLOCK_M=32, BLOCK_N=16, causal=True),
       dict(seq_len=100, head_dim=32, BLOCK_M=16, BLOCK_N=32, causal=False),
       dict(seq_len=77, head_dim=40, BLOCK_M=32, BLOCK_N=32, causal=True),
       dict(seq_len=128, head_dim=64, BLOCK_M=64, BLOCK_N=32, causal=True)]


@pytest.mark.parametrize("p", BWD, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_flash_bwd_is_the_exact_gradient(p, dtype):
    """With O and L from the forward pass, dQ, dK, dV match float64 gradients computed from Q, K, V, dO only."""
    w = build("attention_flash_bwd", dict(p, batch=1, heads=2, dtype=dtype))
    x = flash_bwd_inputs(w, seed=3)
    mem = ne.execute(w, x)
    ref = flash_bwd_reference({k: v.astype(np.float64) for k, v in x.items()}, w.params)
    for n in ("dq", "dk", "dv"):
        assert ne.max_rel_err(mem[n], ref[n]) <= TOL[dtype], n
    # the attached reference (from the saved O and L) is that gradient too
    given = ne.reference(w, x)
    for n in ("dq", "dk", "dv"):
        assert ne.max_rel_err(given[n], ref[n]) <= (1e-6 if dtype == "fp32" else 2e-3), n   # O and L stored rounded


@pytest.mark.parametrize("causal", [False, True])
def test_flash_bwd_reference_against_finite_differences(causal):
    rng = np.random.default_rng(0)
    q, k, v, do = (rng.standard_normal((1, 6, 4)) for _ in range(4))

    def loss(q, k, v):
        s = q @ np.swapaxes(k, -1, -2) / 2.0
        if causal:
            s = np.where(np.tril(np.ones((6, 6), bool)), s, -np.inf)
        e = np.exp(s - s.max(-1, keepdims=True))
        return float(((e / e.sum(-1, keepdims=True)) @ v * do).sum())

    g = flash_bwd_reference(dict(q=q, k=k, v=v, do=do), dict(causal=causal))
    h = 1e-6
    for name, arr in (("dq", q), ("dk", k), ("dv", v)):
        num = np.zeros_like(arr)
        for idx in np.ndindex(arr.shape):
            a, b = arr.copy(), arr.copy()
            a[idx] += h
            b[idx] -= h
            args = {"q": q, "k": k, "v": v}
            key = name[1]
            num[idx] = (loss(**{**args, key: a}) - loss(**{**args, key: b})) / (2 * h)
        np.testing.assert_allclose(g[name], num, rtol=1e-5, atol=1e-7)


def test_flash_bwd_random_inputs_check():
    """The generic check (random O and L, unrelated to Q and K) compares against the same formula."""
    w = build("attention_flash_bwd", dict(batch=1, heads=1, seq_len=70, head_dim=32, BLOCK_M=32, BLOCK_N=16,
                                          causal=True))
    assert ne.check(w, seed=1) <= 2e-3


def test_flash_bwd_launches_and_flops():
    """Preprocess, dK/dV, dQ; 7 matmuls of 2 N^2 d each (4 in dK/dV, 3 in dQ) when nothing is masked."""
    b, h, n, d = 1, 4, 512, 64
    r = gpusim.simulate("attention_flash_bwd", "h200", check=False, batch=b, heads=h, seq_len=n, head_dim=d,
                        BLOCK_M=64, BLOCK_N=64)
    assert [k.launch for k in r.kernels] == ["bwd_preprocess", "bwd_dkdv", "bwd_dq"]
    assert r.launch("bwd_dkdv").tensor_flops == 4 * 2 * b * h * n * n * d
    assert r.launch("bwd_dq").tensor_flops == 3 * 2 * b * h * n * n * d
    causal = gpusim.simulate("attention_flash_bwd", "h200", check=False, batch=b, heads=h, seq_len=n, head_dim=d,
                             BLOCK_M=64, BLOCK_N=64, causal=True)
    # only the tiles on or below the diagonal: (T + 1) / 2T of them for T = n / 64 blocks per side
    t = n // 64
    assert causal.tensor_flops == pytest.approx(r.tensor_flops * (t + 1) / (2 * t), rel=1e-9)


@pytest.mark.slow
def test_flash_bwd_causal_is_faster_when_the_gpu_is_full():
    p = dict(batch=4, heads=16, seq_len=1024, head_dim=64, BLOCK_M=64, BLOCK_N=64)
    full = gpusim.simulate("attention_flash_bwd", "h200", check=False, **p)
    causal = gpusim.simulate("attention_flash_bwd", "h200", check=False, causal=True, **p)
    assert causal.time_us < 0.8 * full.time_us
