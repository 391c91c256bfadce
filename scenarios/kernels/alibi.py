"""ALiBi attention (Press et al., 2022, "Train Short, Test Long"), FlashAttention-style.

Each head h adds a linear bias slope_h * (j - i) to the score of query i and key j, with
slope_h = 2 ** (-8 (h + 1) / heads), instead of using position embeddings. The kernel is the
built-in flash forward with the bias added inside the loop; the reference is plain float64 numpy.

Run it:  gpusim kernels scenarios/kernels/alibi.py
         gpusim run scenarios/examples/alibi.yaml
"""
import math

import numpy as np

from gpusim.dsl import (LOG2E, arange, cdiv, dot, exp2, full, load, loop, maximum, program_id, store, tmax, trace,
                        trans, tsum, where, zeros)
from gpusim.dsl.ir import Launch, TensorArg, Workload, emin
from gpusim.kernels import Param, kernel


def alibi_slopes(heads: int) -> np.ndarray:
    """slope of each head: 2^(-8/heads), 2^(-16/heads), ... (the paper's geometric sequence)."""
    return 2.0 ** (-8.0 * np.arange(1, heads + 1) / heads)


def reference(x, p):
    """float64 softmax(Q K^T / sqrt(d) + bias) V, bias[h, i, j] = slope_h * (j - i)."""
    q, k, v = x["q"], x["k"], x["v"]
    bh, n, d = q.shape
    slopes = np.tile(alibi_slopes(p["heads"]), bh // p["heads"])           # row b*heads + h -> slope_h
    pos = np.arange(n)
    s = q @ np.swapaxes(k, 1, 2) / math.sqrt(d) + slopes[:, None, None] * (pos[None, :] - pos[:, None])
    if p["causal"]:
        s = np.where(pos[None, :] <= pos[:, None], s, -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return {"o": (e / e.sum(axis=-1, keepdims=True)) @ v}


def alibi_body(q, k, v, o, *, heads, BLOCK_M, BLOCK_N, num_stages, causal):
    m, bh = program_id(0), program_id(1)
    n_ctx, d = q.shape[1], q.shape[2]
    head = bh - (bh // heads) * heads                   # program_id expression: bh mod heads
    # slope_h = 2^(-8 (h + 1) / heads): an int32 index tile times a float is fp32 (Triton's rule)
    slope = exp2((arange(head, 1) + 1) * (-8.0 / heads))[:, None]
    qt = load(q, (bh, m * BLOCK_M, 0), (BLOCK_M, d))
    rows = arange(m * BLOCK_M, BLOCK_M)
    end = emin(n_ctx, (m + 1) * BLOCK_M) if causal else n_ctx

    def body(n, acc, m_i, l_i):
        kt = load(k, (bh, n, 0), (BLOCK_N, d))
        cols = arange(n, BLOCK_N)
        bias = (cols[None, :] - rows[:, None]) * slope          # int32 x fp32 -> fp32
        s = (dot(qt, trans(kt)) * (1.0 / math.sqrt(d)) + bias) * LOG2E
        mask = cols[None, :] < n_ctx
        if causal:
            mask = mask & (cols[None, :] <= rows[:, None])
        s = where(mask, s, -math.inf)
        m_new = maximum(m_i, tmax(s, 1))
        p = exp2(s - m_new[:, None])
        alpha = exp2(m_i - m_new)
        vt = load(v, (bh, n, 0), (BLOCK_N, d))
        return dot(p.to(q.dtype), vt, acc * alpha[:, None]), m_new, l_i * alpha + tsum(p, 1)

    init = (zeros((BLOCK_M, d)), full((BLOCK_M,), -math.inf), zeros((BLOCK_M,)))
    acc, m_i, l_i = loop(0, end, BLOCK_N, init, body, stages=num_stages)
    store(o, (bh, m * BLOCK_M, 0), acc / l_i[:, None])


POW2 = (16, 32, 64, 128, 256)


@kernel(help="FlashAttention forward with ALiBi position biases", reference=reference, params=(
    Param("batch", int, 1, "batch size"), Param("heads", int, 8, "attention heads (one ALiBi slope each)"),
    Param("seq_len", int, 1024, "sequence length N"), Param("head_dim", int, 64, "head dimension d", POW2),
    Param("causal", bool, True, "causal mask", positive=False),
    Param("BLOCK_M", int, 64, "query rows per CTA", POW2), Param("BLOCK_N", int, 64, "keys per loop step", POW2),
    Param("num_stages", int, 2, "software-pipelining depth", (1, 2, 3, 4)),
    Param("dtype", str, "fp16", "storage dtype", ("fp16", "bf16", "fp32")),
    Param("num_warps", int, 4, "warps per CTA", (1, 2, 4, 8))))
def alibi_attention(p) -> Workload:
    shape = (p["batch"] * p["heads"], p["seq_len"], p["head_dim"])
    t = {name: TensorArg(name, shape, p["dtype"]) for name in ("q", "k", "v", "o")}
    prog = trace(alibi_body, "alibi_attention", [t["q"], t["k"], t["v"], t["o"]], num_warps=p["num_warps"],
                 heads=p["heads"], BLOCK_M=p["BLOCK_M"], BLOCK_N=p["BLOCK_N"], num_stages=p["num_stages"],
                 causal=p["causal"])
    grid = (cdiv(p["seq_len"], p["BLOCK_M"]), shape[0])
    launch = Launch("alibi", prog, grid, {name: name for name in t})
    return Workload("alibi_attention", t, ("q", "k", "v"), ("o",), (launch,), p)
