"""FlashAttention forward with Gemma-2 attention-score soft-capping: s = cap * tanh(s / cap) before the
softmax, a user kernel whose loop does much transcendental work per dot (tanh on every score).

Run it:  gpusim kernels benchmarks/kernels/softcap_attention.py
"""
import math

import numpy as np

from gpusim.dsl import LOG2E, cdiv, dot, exp2, full, load, loop, maximum, program_id, store, tanh, tmax, trace, trans, tsum, zeros
from gpusim.dsl.ir import Launch, TensorArg, Workload
from gpusim.kernels import Param, kernel


def reference(x, p):
    """float64 softmax(cap * tanh(Q K^T / sqrt(d) / cap)) V."""
    q, k, v = x["q"], x["k"], x["v"]
    s = q @ np.swapaxes(k, 1, 2) / math.sqrt(q.shape[2])
    s = p["cap"] * np.tanh(s / p["cap"])
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return {"o": (e / e.sum(axis=-1, keepdims=True)) @ v}


def softcap_body(q, k, v, o, *, cap, BLOCK_M, BLOCK_N, num_stages):
    m, bh = program_id(0), program_id(1)
    n_ctx, d = q.shape[1], q.shape[2]
    qt = load(q, (bh, m * BLOCK_M, 0), (BLOCK_M, d))

    def body(n, acc, m_i, l_i):
        kt = load(k, (bh, n, 0), (BLOCK_N, d))
        s = dot(qt, trans(kt)) * (1.0 / (math.sqrt(d) * cap))
        s = tanh(s) * (cap * LOG2E)
        m_new = maximum(m_i, tmax(s, 1))
        p = exp2(s - m_new[:, None])
        alpha = exp2(m_i - m_new)
        vt = load(v, (bh, n, 0), (BLOCK_N, d))
        return dot(p.to(q.dtype), vt, acc * alpha[:, None]), m_new, l_i * alpha + tsum(p, 1)

    init = (zeros((BLOCK_M, d)), full((BLOCK_M,), -math.inf), zeros((BLOCK_M,)))
    acc, m_i, l_i = loop(0, n_ctx, BLOCK_N, init, body, stages=num_stages)
    store(o, (bh, m * BLOCK_M, 0), acc / l_i[:, None])


POW2 = (16, 32, 64, 128, 256)


@kernel(help="FlashAttention forward with tanh soft-capped scores", reference=reference, params=(
    Param("batch", int, 4, "batch size"), Param("heads", int, 16, "attention heads"),
    Param("seq_len", int, 1024, "sequence length N"), Param("head_dim", int, 128, "head dimension d", POW2),
    Param("cap", float, 50.0, "soft cap (Gemma-2 uses 50 for attention scores)"),
    Param("BLOCK_M", int, 128, "query rows per CTA", POW2), Param("BLOCK_N", int, 64, "keys per loop step", POW2),
    Param("num_stages", int, 2, "software-pipelining depth", (1, 2, 3, 4)),
    Param("dtype", str, "fp16", "storage dtype", ("fp16", "bf16")),
    Param("num_warps", int, 8, "warps per CTA", (4, 8))))
def softcap_attention(p) -> Workload:
    shape = (p["batch"] * p["heads"], p["seq_len"], p["head_dim"])
    t = {name: TensorArg(name, shape, p["dtype"]) for name in ("q", "k", "v", "o")}
    prog = trace(softcap_body, "softcap_attention", [t["q"], t["k"], t["v"], t["o"]], num_warps=p["num_warps"],
                 cap=p["cap"], BLOCK_M=p["BLOCK_M"], BLOCK_N=p["BLOCK_N"], num_stages=p["num_stages"])
    grid = (cdiv(p["seq_len"], p["BLOCK_M"]), shape[0])
    return Workload("softcap_attention", t, ("q", "k", "v"), ("o",), (Launch("softcap", prog, grid, {n: n for n in t}),), p)
