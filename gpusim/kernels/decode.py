"""attention_decode: flash-decoding (Dao et al. 2023) over a KV cache, with grouped KV heads.

A decode step has ``q_len`` new query tokens (1, or a few when speculating) per head against a
KV cache of ``kv_len`` tokens. One CTA per (batch, head) would leave most SMs idle, so the KV
sequence is split into ``num_splits`` chunks, each its own CTA, writing an fp32 partial output and
its base-2 logsumexp; a second launch combines the splits (log-sum-exp weighted sum).

Grouped-query attention: the ``heads / kv_heads`` query heads that share one KV head are packed
into the rows of one query tile (as FlashAttention's ``pack_gqa`` and FlashInfer do), so each KV
byte is read once per KV head rather than once per query head. ``q`` is stored as
``(batch * kv_heads, group * q_len, d)``, the same memory as ``(batch, heads, q_len, d)``.
With ``causal`` the new token ``j`` (0-based among the ``q_len``) sees the cache up to
position ``kv_len - q_len + j``.
"""
from __future__ import annotations

import math

import numpy as np

from ..dsl import LOG2E, arange, cdiv, dot, exp2, full, load, log2, loop, maximum, program_id, store, tmax, trace, trans, \
    tsum, where, zeros
from ..dsl.ir import Launch, TensorArg, Workload, emin
from .spec import COMMON, POW2, Param, kernel, next_pow2, register_kernel

MAX_BLOCK_M = 128   # packed query rows per CTA; more rows take more CTAs (grid axis 2)


def decode_split_body(q, k, v, o_part, lse, *, BLOCK_M, BLOCK_N, num_stages, chunk, q_len, causal, sm_scale):
    """Partial attention of one query tile over one chunk of the KV cache."""
    split, bkv, mb = program_id(0), program_id(1), program_id(2)
    kv_len, d = k.shape[1], k.shape[2]
    dp = next_pow2(d)
    qk_scale = sm_scale * LOG2E
    qt = load(q, (bkv, mb * BLOCK_M, 0), (BLOCK_M, dp))
    rows = arange(mb * BLOCK_M, BLOCK_M)
    last_visible = (kv_len - q_len) + (rows - (rows / float(q_len)).to("int32") * q_len)  # row % q_len

    def body(n, acc, m_i, l_i):
        kt = load(k, (bkv, n, 0), (BLOCK_N, dp))
        s = dot(qt, trans(kt)) * qk_scale
        cols = arange(n, BLOCK_N)
        mask = cols[None, :] < kv_len
        if causal:
            mask = mask & (cols[None, :] <= last_visible[:, None])
        s = where(mask, s, -math.inf)
        m_new = maximum(m_i, tmax(s, 1))
        m_safe = where(m_new > -math.inf, m_new, 0.0)     # a row with nothing visible yet stays at 0
        p = exp2(s - m_safe[:, None])
        alpha = exp2(m_i - m_safe)
        vt = load(v, (bkv, n, 0), (BLOCK_N, dp))
        return dot(p.to(q.dtype), vt, acc * alpha[:, None]), m_new, l_i * alpha + tsum(p, 1)

    init = (zeros((BLOCK_M, dp)), full((BLOCK_M,), -math.inf), zeros((BLOCK_M,)))
    acc, m_i, l_i = loop(split * chunk, emin(kv_len, (split + 1) * chunk), BLOCK_N, init, body, stages=num_stages)
    o = acc / where(l_i > 0.0, l_i, 1.0)[:, None]
    store(o_part, (bkv, split, mb * BLOCK_M, 0), o)
    store(lse, (bkv, split, mb * BLOCK_M), m_i + log2(l_i))


def decode_combine_body(o_part, lse, o, *, BLOCK_M, SPLITS):
    """o = sum_s exp2(lse_s - lse) o_s with lse = log2 sum_s exp2(lse_s)."""
    bkv, mb = program_id(0), program_id(1)
    n_splits, d = o_part.shape[1], o_part.shape[3]
    dp = next_pow2(d)
    ls = load(lse, (bkv, 0, mb * BLOCK_M), (SPLITS, BLOCK_M), other=-math.inf)
    m = tmax(ls, 0)
    total = m + log2(tsum(exp2(ls - m[None, :]), 0))

    def body(s, acc):
        o_s = load(o_part, (bkv, s, mb * BLOCK_M, 0), (BLOCK_M, dp))
        l_s = load(lse, (bkv, s, mb * BLOCK_M), (BLOCK_M,), other=-math.inf)
        return (acc + o_s * exp2(l_s - total)[:, None],)

    (acc,) = loop(0, n_splits, 1, (zeros((BLOCK_M, dp)),), body)
    store(o, (bkv, mb * BLOCK_M, 0), acc)


def split_plan(kv_len: int, num_splits: int, block_n: int) -> tuple:
    """(chunk, splits): KV tokens per split (a multiple of BLOCK_N) and the number of non-empty splits."""
    chunk = cdiv(cdiv(kv_len, num_splits), block_n) * block_n
    return chunk, cdiv(kv_len, chunk)


def kv_groups(p) -> tuple:
    """(kv_heads, group): KV heads (0 means one per query head) and query heads per KV head."""
    kvh = p["kv_heads"] or p["heads"]
    if kvh < 0 or p["heads"] % kvh:
        raise ValueError(f"heads ({p['heads']}) must be a multiple of kv_heads ({kvh})")
    return kvh, p["heads"] // kvh


def decode_reference(x: dict, p: dict) -> dict:
    """float64 softmax(q k^T / sqrt(d)) v per packed row, with the decode causal mask."""
    q, k, v = x["q"], x["k"], x["v"]
    kv_len, d, q_len = k.shape[1], k.shape[2], p["q_len"]
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(d)
    if p["causal"]:
        j = np.arange(q.shape[1]) % q_len
        visible = np.arange(kv_len)[None, :] <= (kv_len - q_len + j)[:, None]
        s = np.where(visible, s, -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return {"o": (e / e.sum(axis=-1, keepdims=True)) @ v}


@register_kernel
@kernel(name="attention_decode", help="flash-decoding: KV cache split over num_splits CTAs, then a combine launch",
        reference=decode_reference,
        params=(Param("batch", int, 8, "batch size"), Param("heads", int, 32, "query heads"),
                Param("kv_heads", int, 0, "KV heads (GQA/MQA: heads / kv_heads query heads share one); 0: heads",
                      positive=False),
                Param("q_len", int, 1, "new query tokens per sequence (1..16; > 1 when speculating)",
                      tuple(range(1, 17))),
                Param("kv_len", int, 8192, "tokens in the KV cache, the new ones included"),
                Param("head_dim", int, 128, "head dimension d"),
                Param("causal", bool, True, "new token j sees the cache up to kv_len - q_len + j", positive=False),
                Param("num_splits", int, 16, "CTAs the KV sequence is split over, per (batch, KV head)"),
                Param("BLOCK_N", int, 64, "KV rows per loop iteration", POW2),
                Param("num_stages", int, 2, "software-pipelining depth", (1, 2, 3, 4, 5))) + COMMON)
def attention_decode(p) -> Workload:
    kvh, group = kv_groups(p)
    if p["q_len"] > p["kv_len"]:
        raise ValueError(f"q_len ({p['q_len']}) cannot exceed kv_len ({p['kv_len']}): the new tokens are in the cache")
    bkv, rows, d, dt = p["batch"] * kvh, group * p["q_len"], p["head_dim"], p["dtype"]
    chunk, splits = split_plan(p["kv_len"], p["num_splits"], p["BLOCK_N"])
    bm = min(MAX_BLOCK_M, max(16, next_pow2(rows)))     # tl.dot needs at least 16 rows
    t = {"q": TensorArg("q", (bkv, rows, d), dt),
         "k": TensorArg("k", (bkv, p["kv_len"], d), dt),
         "v": TensorArg("v", (bkv, p["kv_len"], d), dt),
         "o_part": TensorArg("o_part", (bkv, splits, rows, d), "fp32"),
         "lse": TensorArg("lse", (bkv, splits, rows), "fp32"),
         "o": TensorArg("o", (bkv, rows, d), dt)}
    split = trace(decode_split_body, "decode_split", [t[n] for n in ("q", "k", "v", "o_part", "lse")],
                  num_warps=p["num_warps"], BLOCK_M=bm, BLOCK_N=p["BLOCK_N"], num_stages=p["num_stages"],
                  chunk=chunk, q_len=p["q_len"], causal=p["causal"], sm_scale=1.0 / math.sqrt(d))
    combine = trace(decode_combine_body, "decode_combine", [t[n] for n in ("o_part", "lse", "o")],
                    num_warps=p["num_warps"], BLOCK_M=bm, SPLITS=next_pow2(splits))
    mblocks = cdiv(rows, bm)
    launches = (Launch("decode_split", split, (splits, bkv, mblocks), {n: n for n in ("q", "k", "v", "o_part", "lse")}),
                Launch("decode_combine", combine, (bkv, mblocks), {n: n for n in ("o_part", "lse", "o")}))
    return Workload("attention_decode", t, ("q", "k", "v"), ("o",), launches, dict(p))
