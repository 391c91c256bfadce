"""attention_flash_bwd: the FlashAttention-2 backward pass (Dao 2023, Algorithm 2), in three launches.

Inputs are the forward's Q, K, V, O, the incoming gradient dO and the forward's logsumexp
``L = log sum_j exp(S_ij)`` of the scaled scores ``S = Q K^T / sqrt(d)`` (what FlashAttention
saves as ``softmax_lse``). Nothing of size N x N is stored; P is recomputed from Q, K and L.

1. ``bwd_preprocess``: ``D_i = sum_d dO_id O_id`` (the row term of the softmax Jacobian).
2. ``bwd_dkdv``: one CTA per KV block of ``BLOCK_N`` keys walks the query blocks and accumulates
   ``dV = P^T dO`` and ``dK = dS^T Q / sqrt(d)`` with ``dS = P * (dO V^T - D)``.
3. ``bwd_dq``: one CTA per query block of ``BLOCK_M`` rows walks the KV blocks and accumulates
   ``dQ = dS K / sqrt(d)``. A separate launch, as in Triton's fused-attention tutorial, so that
   dQ needs no atomic adds (FlashAttention-2 itself adds dQ atomically inside launch 2).
"""
from __future__ import annotations

import math

import numpy as np

from ..dsl import LOG2E, arange, cdiv, dot, exp2, load, loop, program_id, store, trace, trans, tsum, where, zeros
from ..dsl.ir import Launch, TensorArg, Workload, emin
from .spec import COMMON, POW2, Param, kernel, next_pow2, register_kernel

PRE_BLOCK = 128     # rows per CTA of the preprocessing launch (Triton tutorial's PRE_BLOCK)


def bwd_preprocess_body(o, do, delta, *, BLOCK):
    m, bh = program_id(0), program_id(1)
    dp = next_pow2(o.shape[2])
    ot = load(o, (bh, m * BLOCK, 0), (BLOCK, dp)).to("fp32")
    dot_ = load(do, (bh, m * BLOCK, 0), (BLOCK, dp)).to("fp32")
    store(delta, (bh, m * BLOCK), tsum(ot * dot_, 1))


def bwd_dkdv_body(q, k, v, do, lse, delta, dk, dv, *, BLOCK_M, BLOCK_N, num_stages, causal, sm_scale):
    n, bh = program_id(0), program_id(1)
    n_ctx, d = q.shape[1], q.shape[2]
    dp = next_pow2(d)
    qk_scale = sm_scale * LOG2E
    kt = load(k, (bh, n * BLOCK_N, 0), (BLOCK_N, dp))
    vt = load(v, (bh, n * BLOCK_N, 0), (BLOCK_N, dp))
    keys = arange(n * BLOCK_N, BLOCK_N)
    # causal: query blocks that end before this key block starts see none of it
    start = ((n * BLOCK_N) // BLOCK_M) * BLOCK_M if causal else 0

    def body(m, dk_acc, dv_acc):
        qt = load(q, (bh, m, 0), (BLOCK_M, dp))
        dot_ = load(do, (bh, m, 0), (BLOCK_M, dp))
        l2 = load(lse, (bh, m), (BLOCK_M,)) * LOG2E
        dl = load(delta, (bh, m), (BLOCK_M,))
        rows = arange(m, BLOCK_M)
        mask = rows[None, :] < n_ctx
        if causal:
            mask = mask & (rows[None, :] >= keys[:, None])
        p_t = where(mask, exp2(dot(kt, trans(qt)) * qk_scale - l2[None, :]), 0.0)     # P^T, (BLOCK_N, BLOCK_M)
        dv_acc = dot(p_t.to(q.dtype), dot_, dv_acc)
        ds_t = p_t * (dot(vt, trans(dot_)) - dl[None, :])
        return dot(ds_t.to(q.dtype), qt, dk_acc), dv_acc

    init = (zeros((BLOCK_N, dp)), zeros((BLOCK_N, dp)))
    dk_acc, dv_acc = loop(start, n_ctx, BLOCK_M, init, body, stages=num_stages)
    store(dk, (bh, n * BLOCK_N, 0), dk_acc * sm_scale)
    store(dv, (bh, n * BLOCK_N, 0), dv_acc)


def bwd_dq_body(q, k, v, do, lse, delta, dq, *, BLOCK_M, BLOCK_N, num_stages, causal, sm_scale):
    m, bh = program_id(0), program_id(1)
    n_ctx, d = q.shape[1], q.shape[2]
    dp = next_pow2(d)
    qk_scale = sm_scale * LOG2E
    qt = load(q, (bh, m * BLOCK_M, 0), (BLOCK_M, dp))
    dot_ = load(do, (bh, m * BLOCK_M, 0), (BLOCK_M, dp))
    l2 = load(lse, (bh, m * BLOCK_M), (BLOCK_M,)) * LOG2E
    dl = load(delta, (bh, m * BLOCK_M), (BLOCK_M,))
    rows = arange(m * BLOCK_M, BLOCK_M)
    end = emin(n_ctx, (m + 1) * BLOCK_M) if causal else n_ctx

    def body(n, dq_acc):
        kt = load(k, (bh, n, 0), (BLOCK_N, dp))
        vt = load(v, (bh, n, 0), (BLOCK_N, dp))
        cols = arange(n, BLOCK_N)
        mask = cols[None, :] < n_ctx
        if causal:
            mask = mask & (rows[:, None] >= cols[None, :])
        p = where(mask, exp2(dot(qt, trans(kt)) * qk_scale - l2[:, None]), 0.0)
        ds = p * (dot(dot_, trans(vt)) - dl[:, None])
        return (dot(ds.to(q.dtype), kt, dq_acc),)

    (dq_acc,) = loop(0, end, BLOCK_N, (zeros((BLOCK_M, dp)),), body, stages=num_stages)
    store(dq, (bh, m * BLOCK_M, 0), dq_acc * sm_scale)


# --------------------------------------------------------------------------- float64 reference and inputs
def _probs(q, k, causal):
    """(P, logsumexp) of softmax(q k^T / sqrt(d)) in float64."""
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[1]
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    mx = s.max(axis=-1, keepdims=True)
    e = np.exp(s - mx)
    tot = e.sum(axis=-1, keepdims=True)
    return e / tot, (mx + np.log(tot))[..., 0]


def flash_bwd_reference(inputs: dict, p: dict) -> dict:
    """Exact gradients of sum(dO * softmax(Q K^T / sqrt(d)) V) from Q, K, V and dO alone (float64)."""
    q, k, v, do = (np.asarray(inputs[n], dtype=np.float64) for n in ("q", "k", "v", "do"))
    scale = 1.0 / math.sqrt(q.shape[-1])
    prob, _ = _probs(q, k, p["causal"])
    dv = np.swapaxes(prob, -1, -2) @ do
    dprob = do @ np.swapaxes(v, -1, -2)
    ds = prob * (dprob - (dprob * prob).sum(axis=-1, keepdims=True))
    return {"dq": ds @ k * scale, "dk": np.swapaxes(ds, -1, -2) @ q * scale, "dv": dv}


def flash_bwd_inputs(workload: Workload, seed: int = 0) -> dict:
    """Random Q, K, V, dO and the O and L the forward pass computes from them: O = softmax(S) V and
    L = logsumexp(S) of S = Q K^T / sqrt(d), in float64 from the stored (rounded) Q, K, V, then O
    rounded to its dtype and L to fp32 (what FlashAttention saves). The kernel's input generator."""
    from ..backends.numpy_exec import random_normal_inputs, to_dtype

    t = workload.tensors
    out = random_normal_inputs(workload, seed, names=("q", "k", "v", "do"))
    o, lse = forward64(out["q"], out["k"], out["v"], workload.params["causal"])
    out["o"] = to_dtype(o, t["o"].dtype)
    out["lse"] = lse.astype(np.float32)
    return out


def forward64(q, k, v, causal: bool, block_elems: int = 1 << 24, device: str | None = None) -> tuple:
    """(O, L) of softmax(q k^T / sqrt(d)) v over (batch*heads, N, d) arrays, in float64, a block of
    query rows at a time (memory O(block_elems)). ``device`` "cuda" (or "cpu") runs the same float64
    arithmetic in torch there; by default large problems use a CUDA GPU when torch sees one (N = 8K
    over 64 heads is 2 TFLOP: minutes on a CPU, a fraction of a second on an H200)."""
    bh, n, d = q.shape
    scale = 1.0 / math.sqrt(d)
    if device is None and bh * n * n >= (1 << 26) and _cuda_torch() is not None:
        device = "cuda"
    o = np.empty((bh, n, d), dtype=np.float64)
    lse = np.empty((bh, n), dtype=np.float64)
    if device is not None:
        import torch

        rows = max(1, min(n, (1 << 28) // n))
        for h in range(bh):
            kh, vh, qh = (torch.from_numpy(np.ascontiguousarray(x[h])).to(device, torch.float64) for x in (k, v, q))
            for r0 in range(0, n, rows):
                s = qh[r0:r0 + rows] @ kh.T * scale
                if causal:
                    i = torch.arange(r0, min(n, r0 + rows), device=device)[:, None]
                    s = s.masked_fill(torch.arange(n, device=device)[None, :] > i, float("-inf"))
                mx = s.amax(dim=-1, keepdim=True)
                e = torch.exp(s - mx)
                tot = e.sum(dim=-1, keepdim=True)
                o[h, r0:r0 + rows] = ((e @ vh) / tot).cpu().numpy()
                lse[h, r0:r0 + rows] = (mx + torch.log(tot))[:, 0].cpu().numpy()
        return o, lse
    rows = max(1, min(n, block_elems // n))
    for h in range(bh):
        kh, vh = k[h].astype(np.float64), v[h].astype(np.float64)
        for r0 in range(0, n, rows):
            s = q[h, r0:r0 + rows].astype(np.float64) @ kh.T * scale
            if causal:
                i = np.arange(r0, min(n, r0 + rows))[:, None]
                s = np.where(np.arange(n)[None, :] <= i, s, -np.inf)
            mx = s.max(axis=-1, keepdims=True)
            e = np.exp(s - mx)
            tot = e.sum(axis=-1, keepdims=True)
            o[h, r0:r0 + rows] = (e @ vh) / tot
            lse[h, r0:r0 + rows] = (mx + np.log(tot))[:, 0]
    return o, lse


def _cuda_torch():
    """torch when it is installed and sees a CUDA GPU (imported only here), else None."""
    import sys

    if "torch" not in sys.modules:
        try:
            import torch  # noqa: F401
        except Exception:
            return None
    torch = sys.modules["torch"]
    try:
        return torch if torch.cuda.is_available() else None
    except Exception:
        return None


def flash_bwd_given_forward(x: dict, p: dict) -> dict:
    """The backward pass as FlashAttention defines it from the saved O and L (float64):
    P = exp(S - L), D = rowsum(dO * O), dS = P * (dO V^T - D). When O and L are the forward's
    (``flash_bwd_inputs``, the kernel's input generator) this is the exact gradient
    ``flash_bwd_reference``; with unrelated O and L it is still what the kernel must compute."""
    q, k, v, o, do, lse = (x[n] for n in ("q", "k", "v", "o", "do", "lse"))
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = q @ np.swapaxes(k, -1, -2) * scale
    prob = np.exp(s - lse[..., None])
    if p["causal"]:
        prob = np.tril(prob)
    ds = prob * (do @ np.swapaxes(v, -1, -2) - (do * o).sum(axis=-1, keepdims=True))
    return {"dq": ds @ k * scale, "dk": np.swapaxes(ds, -1, -2) @ q * scale, "dv": np.swapaxes(prob, -1, -2) @ do}


@register_kernel
@kernel(name="attention_flash_bwd", help="FlashAttention-2 backward: preprocess D, then dK/dV per KV block and dQ per "
                                          "query block (no atomics)",
        reference=flash_bwd_given_forward, inputs=flash_bwd_inputs,
        params=(Param("batch", int, 4, "batch size"), Param("heads", int, 16, "attention heads"),
                Param("seq_len", int, 4096, "sequence length N"), Param("head_dim", int, 64, "head dimension d"),
                Param("causal", bool, False, "causal mask; skips fully masked tiles", positive=False),
                Param("BLOCK_M", int, 64, "query rows per tile (the dQ launch keeps one on chip)", POW2),
                Param("BLOCK_N", int, 64, "key rows per tile (the dK/dV launch keeps one on chip)", POW2),
                Param("num_stages", int, 2, "software-pipelining depth", (1, 2, 3, 4, 5))) + COMMON)
def attention_flash_bwd(p) -> Workload:
    bh, n, d, dt = p["batch"] * p["heads"], p["seq_len"], p["head_dim"], p["dtype"]
    t = {nm: TensorArg(nm, (bh, n, d), dt) for nm in ("q", "k", "v", "o", "do")}
    t["lse"] = TensorArg("lse", (bh, n), "fp32")
    t["delta"] = TensorArg("delta", (bh, n), "fp32")
    t.update({nm: TensorArg(nm, (bh, n, d), dt) for nm in ("dq", "dk", "dv")})
    bm, bn, nw = p["BLOCK_M"], p["BLOCK_N"], p["num_warps"]
    tiles = dict(BLOCK_M=bm, BLOCK_N=bn, num_stages=p["num_stages"], causal=p["causal"], sm_scale=1.0 / math.sqrt(d))
    pre = trace(bwd_preprocess_body, "bwd_preprocess", [t["o"], t["do"], t["delta"]], num_warps=nw, BLOCK=PRE_BLOCK)
    dkdv_args = ("q", "k", "v", "do", "lse", "delta", "dk", "dv")
    dkdv = trace(bwd_dkdv_body, "bwd_dkdv", [t[x] for x in dkdv_args], num_warps=nw, **tiles)
    dq_args = ("q", "k", "v", "do", "lse", "delta", "dq")
    dq = trace(bwd_dq_body, "bwd_dq", [t[x] for x in dq_args], num_warps=nw, **tiles)
    launches = (Launch("bwd_preprocess", pre, (cdiv(n, PRE_BLOCK), bh), {x: x for x in ("o", "do", "delta")}),
                Launch("bwd_dkdv", dkdv, (cdiv(n, bn), bh), {x: x for x in dkdv_args}),
                Launch("bwd_dq", dq, (cdiv(n, bm), bh), {x: x for x in dq_args}))
    return Workload("attention_flash_bwd", t, ("q", "k", "v", "o", "do", "lse"), ("dq", "dk", "dv"), launches, dict(p))
