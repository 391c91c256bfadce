"""Attention built-ins: ``attention_naive`` (four launches, S and P in HBM) and
``attention_flash`` (FlashAttention forward, one fused launch), and their float64 reference."""
from __future__ import annotations

import math

import numpy as np

from ..dsl import (LOG2E, arange, cdiv, dot, exp2, full, load, loop, maximum, program_id, store, tmax, trace, trans,
                   tsum, where, zeros)
from ..dsl.ir import Launch, TensorArg, Workload, emin
from .spec import COMMON, POW2, Param, kernel, next_pow2, register_kernel

ATTN_SHAPE = (Param("batch", int, 4, "batch size"), Param("heads", int, 16, "attention heads"),
              Param("seq_len", int, 4096, "sequence length N"), Param("head_dim", int, 64, "head dimension d"))


def attention_reference(x, p):
    """softmax(Q K^T / sqrt(d)) V in float64 (lower-triangular mask when ``p['causal']``)."""
    q, k, v = x["q"], x["k"], x["v"]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if p.get("causal"):
        n = q.shape[1]
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
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


def flash_body(q, k, v, o, *, BLOCK_M, BLOCK_N, num_stages, causal, sm_scale):
    """FlashAttention forward: one CTA per (query block, batch*head), online softmax over key blocks."""
    m, bh = program_id(0), program_id(1)
    n_ctx, d = q.shape[1], q.shape[2]
    dp = next_pow2(d)
    qk_scale = sm_scale * LOG2E
    qt = load(q, (bh, m * BLOCK_M, 0), (BLOCK_M, dp))
    rows = arange(m * BLOCK_M, BLOCK_M)
    end = emin(n_ctx, (m + 1) * BLOCK_M) if causal else n_ctx

    def body(n, acc, m_i, l_i):
        kt = load(k, (bh, n, 0), (BLOCK_N, dp))
        s = dot(qt, trans(kt)) * qk_scale
        cols = arange(n, BLOCK_N)
        mask = cols[None, :] < n_ctx
        if causal:
            mask = mask & (rows[:, None] >= cols[None, :])
        s = where(mask, s, -math.inf)
        m_new = maximum(m_i, tmax(s, 1))
        p = exp2(s - m_new[:, None])
        alpha = exp2(m_i - m_new)
        l_new = l_i * alpha + tsum(p, 1)
        vt = load(v, (bh, n, 0), (BLOCK_N, dp))
        acc = dot(p.to(q.dtype), vt, acc * alpha[:, None])
        return acc, m_new, l_new

    init = (zeros((BLOCK_M, dp)), full((BLOCK_M,), -math.inf), zeros((BLOCK_M,)))
    acc, m_i, l_i = loop(0, end, BLOCK_N, init, body, stages=num_stages)
    store(o, (bh, m * BLOCK_M, 0), acc / l_i[:, None])


# --------------------------------------------------------------------------- workload builders
def attention_tensors(p) -> dict:
    """q, k, v, o of shape [batch*heads, seq_len, head_dim] in the storage dtype."""
    bh, n, d, dt = p["batch"] * p["heads"], p["seq_len"], p["head_dim"], p["dtype"]
    return {nm: TensorArg(nm, (bh, n, d), dt) for nm in ("q", "k", "v", "o")}


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
@kernel(name="attention_flash", help="one fused launch, tiled online softmax (FlashAttention forward)",
        reference=attention_reference,
        params=ATTN_SHAPE + (Param("causal", bool, False, "causal mask; skips fully masked tiles", positive=False),
                             Param("BLOCK_M", int, 128, "query rows per CTA", POW2),
                             Param("BLOCK_N", int, 64, "key rows per loop iteration", POW2),
                             Param("num_stages", int, 2, "software-pipelining depth", (1, 2, 3, 4, 5))) + COMMON)
def attention_flash(p) -> Workload:
    t = attention_tensors(p)
    bm, bn, n = p["BLOCK_M"], p["BLOCK_N"], p["seq_len"]
    prog = trace(flash_body, "attention_flash", [t["q"], t["k"], t["v"], t["o"]], num_warps=p["num_warps"],
                 BLOCK_M=bm, BLOCK_N=bn, num_stages=p["num_stages"], causal=p["causal"],
                 sm_scale=1.0 / math.sqrt(p["head_dim"]))
    grid = (cdiv(n, bm), p["batch"] * p["heads"])
    launch = Launch("flash", prog, grid, {x: x for x in ("q", "k", "v", "o")})
    return Workload("attention_flash", t, ("q", "k", "v"), ("o",), (launch,), dict(p))
