"""Attention built-ins: ``attention_naive`` (four launches, S and P in HBM) and
``attention_flash`` (FlashAttention forward, one fused launch), and their float64 reference."""
from __future__ import annotations

import math

import numpy as np

from ..dsl import (LOG2E, arange, cdiv, dot, exp2, full, load, loop, maximum, program_id, store, tmax, trace, trans,
                   tsum, where, zeros)
from ..dsl.ir import Launch, TensorArg, Workload, emax, emin
from .spec import COMMON, DTYPES, POW2, Param, common, kernel, next_pow2, register_kernel

ATTN_SHAPE = (Param("batch", int, 4, "batch size"), Param("heads", int, 16, "attention heads"),
              Param("seq_len", int, 4096, "sequence length N"), Param("head_dim", int, 64, "head dimension d"))


def attention_reference(x, p):
    """softmax(Q K^T / sqrt(d)) V in float64: lower-triangular mask when ``p['causal']``, keys within
    ``p['window']`` positions of the query when it is set, and each K/V head shared by
    ``heads / kv_heads`` consecutive query heads."""
    q, k, v = x["q"], x["k"], x["v"]
    if p.get("dtype") == "fp8e4m3":         # fp8: V is given as [heads, head_dim, seq_len]
        v = np.swapaxes(v, -1, -2)
    group = q.shape[0] // k.shape[0]
    if group > 1:
        k, v = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    n = q.shape[1]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    visible = np.ones((n, n), dtype=bool)
    if p.get("causal"):
        visible &= j <= i
    if p.get("window"):
        visible &= np.abs(i - j) < p["window"]
    s = np.where(visible, s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return {"o": (e / e.sum(axis=-1, keepdims=True)) @ v}


# --------------------------------------------------------------------------- DSL kernel bodies
def scale_body(s_in, s_out, *, scale, BLOCK_R, BLOCK_C):
    r, c, bh = program_id(0), program_id(1), program_id(2)
    t = load(s_in, (bh, r * BLOCK_R, c * BLOCK_C), (BLOCK_R, BLOCK_C))
    store(s_out, (bh, r * BLOCK_R, c * BLOCK_C), t * scale)


def softmax_body(s, p, *, BLOCK_C):
    """Row softmax over the last axis, one row per program, the whole row in one tile."""
    row, bh = program_id(0), program_id(1)
    n = s.shape[-1]
    x = load(s, (bh, row, 0), (1, BLOCK_C)).to("fp32")
    cols = arange(0, BLOCK_C, (1, BLOCK_C), axis=1)
    x = where(cols < n, x, -math.inf)
    e = exp2((x - tmax(x, 1)[:, None]) * LOG2E)
    store(p, (bh, row, 0), e / tsum(e, 1)[:, None])


def flash_body(q, k, v, o, *, BLOCK_M, BLOCK_N, num_stages, causal, sm_scale, group=1, window=0, v_trans=False):
    """FlashAttention forward: one CTA per (query block, batch*head), online softmax over key blocks.

    ``group`` query heads share one K/V head (GQA/MQA; K and V hold batch*kv_heads heads).
    ``window`` > 0 keeps keys fewer than ``window`` positions from the query (only earlier ones
    when causal); the loop visits only the key blocks that meet that band. ``v_trans``: V is given
    as [heads, d, n], K-major for ``P V`` (fp8, whose MMA reads only K-major operands)."""
    m, bh = program_id(0), program_id(1)
    kvh = bh // group if group > 1 else bh
    n_ctx, d = q.shape[1], q.shape[2]
    dp = next_pow2(d)
    qk_scale = sm_scale * LOG2E
    qt = load(q, (bh, m * BLOCK_M, 0), (BLOCK_M, dp))
    rows = arange(m * BLOCK_M, BLOCK_M)
    start = 0
    end = emin(n_ctx, (m + 1) * BLOCK_M) if causal else n_ctx
    if window:
        start = (emax(0, m * BLOCK_M - (window - 1)) // BLOCK_N) * BLOCK_N
        if not causal:
            end = emin(n_ctx, (m + 1) * BLOCK_M + (window - 1))

    def body(n, acc, m_i, l_i):
        kt = load(k, (kvh, n, 0), (BLOCK_N, dp))
        s = dot(qt, trans(kt)) * qk_scale
        cols = arange(n, BLOCK_N)
        mask = cols[None, :] < n_ctx
        if causal:
            mask = mask & (rows[:, None] >= cols[None, :])
        if window:
            mask = mask & (rows[:, None] - cols[None, :] < window)
            if not causal:
                mask = mask & (cols[None, :] - rows[:, None] < window)
        s = where(mask, s, -math.inf)
        m_new = maximum(m_i, tmax(s, 1))
        # with a window a row can see nothing in a whole key block: keep it at 0, not NaN
        m_sub = where(m_new > -math.inf, m_new, 0.0) if window else m_new
        p = exp2(s - m_sub[:, None])
        alpha = exp2(m_i - m_sub)
        l_new = l_i * alpha + tsum(p, 1)
        vt = trans(load(v, (kvh, 0, n), (dp, BLOCK_N))) if v_trans else load(v, (kvh, n, 0), (BLOCK_N, dp))
        acc = dot(p.to(q.dtype), vt, acc * alpha[:, None])
        return acc, m_new, l_new

    init = (zeros((BLOCK_M, dp)), full((BLOCK_M,), -math.inf), zeros((BLOCK_M,)))
    acc, m_i, l_i = loop(start, end, BLOCK_N, init, body, stages=num_stages)
    store(o, (bh, m * BLOCK_M, 0), acc / l_i[:, None])


# --------------------------------------------------------------------------- workload builders
def attention_tensors(p) -> dict:
    """q, k, v, o of shape [batch*heads, seq_len, head_dim] in the storage dtype; in fp8e4m3, o is
    fp16 and v is [batch*heads, head_dim, seq_len] (K-major for ``P V``, as FP8 attention kernels
    take it: an MN-major fp8 V is transposed byte by byte into shared memory)."""
    bh, n, d, dt = p["batch"] * p["heads"], p["seq_len"], p["head_dim"], p["dtype"]
    t = {nm: TensorArg(nm, (bh, n, d), dt) for nm in ("q", "k", "v", "o")}
    if dt == "fp8e4m3":
        t["o"] = TensorArg("o", (bh, n, d), "fp16")
        t["v"] = TensorArg("v", (bh, d, n), dt)
    return t


@register_kernel
@kernel(name="attention_naive", help="four launches qk, scale, softmax, pv; S and P live in HBM",
        reference=attention_reference,
        params=ATTN_SHAPE + (Param("causal", bool, False, "not supported (flash only)", positive=False),) + COMMON)
def attention_naive(p) -> Workload:
    from .matmul import matmul_body     # imported here so that matmul registers after the attention kernels

    t = attention_tensors(p)
    bh, n, d, dt = p["batch"] * p["heads"], p["seq_len"], p["head_dim"], p["dtype"]
    if p["causal"]:
        raise ValueError("attention_naive does not take causal=true (only attention_flash masks)")
    t["s"] = TensorArg("s", (bh, n, n), dt)         # S = Q K^T
    t["s2"] = TensorArg("s2", (bh, n, n), dt)       # S / sqrt(d)
    t["p"] = TensorArg("p", (bh, n, n), dt)         # softmax(S)
    nw = p["num_warps"]
    tm, tn, tk = NAIVE_TILES["BLOCK_M"], NAIVE_TILES["BLOCK_N"], min(NAIVE_TILES["BLOCK_K"], next_pow2(d))
    qk = trace(matmul_body, "qk", [t["q"], t["k"], t["s"]], num_warps=nw, BLOCK_M=tm, BLOCK_N=tn, BLOCK_K=tk,
               num_stages=NAIVE_TILES["num_stages"], trans_b=True, batched=True)
    sc = trace(scale_body, "scale", [t["s"], t["s2"]], num_warps=nw, scale=1.0 / math.sqrt(d), **SCALE_TILE)
    sm = trace(softmax_body, "softmax", [t["s2"], t["p"]], num_warps=max(nw, min(16, next_pow2(n) // 256)),
               BLOCK_C=next_pow2(n))
    dpv = next_pow2(d)
    pv = trace(matmul_body, "pv", [t["p"], t["v"], t["o"]], num_warps=nw, BLOCK_M=tm, BLOCK_N=min(dpv, 128),
               BLOCK_K=NAIVE_TILES["BLOCK_K"], num_stages=NAIVE_TILES["num_stages"], batched=True)
    launches = (
        Launch("qk", qk, (cdiv(n, tm), cdiv(n, tn), bh), {"q": "q", "k": "k", "s": "s"}),
        Launch("scale", sc, (cdiv(n, SCALE_TILE["BLOCK_R"]), cdiv(n, SCALE_TILE["BLOCK_C"]), bh), {"s": "s", "s2": "s2"}),
        Launch("softmax", sm, (n, bh), {"s2": "s2", "p": "p"}),
        Launch("pv", pv, (cdiv(n, tm), cdiv(d, min(dpv, 128)), bh), {"p": "p", "v": "v", "o": "o"}),
    )
    return Workload("attention_naive", t, ("q", "k", "v"), ("o",), launches, dict(p))


NAIVE_TILES = dict(BLOCK_M=128, BLOCK_N=64, BLOCK_K=64, num_stages=3)   # qk and pv GEMM tiles
SCALE_TILE = dict(BLOCK_R=32, BLOCK_C=128)


@register_kernel
@kernel(name="attention_flash", help="one fused launch, tiled online softmax (FlashAttention forward); with "
                                    "fp8e4m3 Q, K, V (no per-tensor scales; V given as [heads, head_dim, seq_len]) "
                                    "P is rounded to fp8e4m3 for P V and O is fp16",
        reference=attention_reference,
        params=ATTN_SHAPE + (Param("causal", bool, False, "causal mask; skips fully masked tiles", positive=False),
                             Param("BLOCK_M", int, 128, "query rows per CTA", POW2),
                             Param("BLOCK_N", int, 64, "key rows per loop iteration", POW2),
                             Param("num_stages", int, 2, "software-pipelining depth", (1, 2, 3, 4, 5)),
                             Param("kv_heads", int, 0, "K/V heads, each shared by heads / kv_heads query heads "
                                                       "(GQA; 1: MQA); 0: heads", positive=False),
                             Param("window", int, 0, "sliding window: keys fewer than this many positions from the "
                                                     "query (earlier ones only when causal); 0: off",
                                   positive=False))
        + common(DTYPES + ("fp8e4m3",), "storage dtype of Q, K, V (and of O, fp16 for fp8e4m3)"))
def attention_flash(p) -> Workload:
    t = attention_tensors(p)
    bm, bn, n = p["BLOCK_M"], p["BLOCK_N"], p["seq_len"]
    kvh = p["kv_heads"] or p["heads"]
    if kvh < 0 or p["heads"] % kvh:
        raise ValueError(f"kv_heads must divide heads ({p['heads']}), got {p['kv_heads']}")
    if p["window"] < 0:
        raise ValueError(f"window must be 0 (off) or a positive number of keys, got {p['window']}")
    extra = {}          # only what differs from plain attention, so its IR and Triton source stay as they were
    if kvh != p["heads"]:
        extra["group"] = p["heads"] // kvh
        for nm in ("k", "v"):
            t[nm] = TensorArg(nm, (p["batch"] * kvh,) + t[nm].shape[1:], p["dtype"])
    if p["window"]:
        extra["window"] = p["window"]
    if p["dtype"] == "fp8e4m3":
        extra["v_trans"] = True
    prog = trace(flash_body, "attention_flash", [t["q"], t["k"], t["v"], t["o"]], num_warps=p["num_warps"],
                 BLOCK_M=bm, BLOCK_N=bn, num_stages=p["num_stages"], causal=p["causal"],
                 sm_scale=1.0 / math.sqrt(p["head_dim"]), **extra)
    grid = (cdiv(n, bm), p["batch"] * p["heads"])
    launch = Launch("flash", prog, grid, {x: x for x in ("q", "k", "v", "o")})
    return Workload("attention_flash", t, ("q", "k", "v"), ("o",), (launch,), dict(p))
