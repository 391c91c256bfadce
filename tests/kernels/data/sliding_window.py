"""A user kernel for the tests: causal sliding-window attention (each query sees the last
``window`` keys, itself included), flash-style, skipping key blocks wholly outside the window."""
import math

import numpy as np

from gpusim.dsl import (LOG2E, arange, cdiv, dot, emax, emin, exp2, full, load, loop, maximum, program_id, store,
                        tmax, trace, trans, tsum, where, zeros)
from gpusim.dsl.ir import Launch, TensorArg, Workload
from gpusim.kernels import COMMON, Param, kernel


def reference(x, p):
    q, k, v = x["q"], x["k"], x["v"]
    n = q.shape[1]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    s = q @ np.swapaxes(k, 1, 2) / math.sqrt(q.shape[2])
    s = np.where((j <= i) & (j > i - p["window"]), s, -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return {"o": (e / e.sum(axis=-1, keepdims=True)) @ v}


def body_fn(q, k, v, o, *, window, BLOCK_M, BLOCK_N):
    m, bh = program_id(0), program_id(1)
    n_ctx, d = q.shape[1], q.shape[2]
    qt = load(q, (bh, m * BLOCK_M, 0), (BLOCK_M, d))
    rows = arange(m * BLOCK_M, BLOCK_M)
    start = emax(0, ((m * BLOCK_M - window + 1) // BLOCK_N) * BLOCK_N)

    def body(n, acc, m_i, l_i):
        cols = arange(n, BLOCK_N)
        s = dot(qt, trans(load(k, (bh, n, 0), (BLOCK_N, d)))) * (LOG2E / math.sqrt(d))
        keep = (cols[None, :] <= rows[:, None]) & (cols[None, :] > rows[:, None] - window) & (cols[None, :] < n_ctx)
        s = where(keep, s, -math.inf)
        m_new = maximum(m_i, tmax(s, 1))
        m_safe = where(m_new == -math.inf, 0.0, m_new)          # a row with nothing seen yet
        p = exp2(s - m_safe[:, None])
        alpha = exp2(m_i - m_safe)
        acc = dot(p.to(q.dtype), load(v, (bh, n, 0), (BLOCK_N, d)), acc * alpha[:, None])
        return acc, m_new, l_i * alpha + tsum(p, 1)

    init = (zeros((BLOCK_M, d)), full((BLOCK_M,), -math.inf), zeros((BLOCK_M,)))
    acc, _, l_i = loop(start, emin(n_ctx, (m + 1) * BLOCK_M), BLOCK_N, init, body)
    store(o, (bh, m * BLOCK_M, 0), acc / l_i[:, None])


@kernel(help="causal sliding-window attention", reference=reference, params=(
    Param("bh", int, 2, "batch*heads"), Param("seq_len", int, 100, "N"), Param("head_dim", int, 32, "d"),
    Param("window", int, 24, "keys each query sees"), Param("BLOCK_M", int, 32, "rows"),
    Param("BLOCK_N", int, 16, "keys per step")) + COMMON)
def sliding_window(p):
    t = {nm: TensorArg(nm, (p["bh"], p["seq_len"], p["head_dim"]), p["dtype"]) for nm in ("q", "k", "v", "o")}
    prog = trace(body_fn, "sliding_window", [t["q"], t["k"], t["v"], t["o"]], window=p["window"],
                 BLOCK_M=p["BLOCK_M"], BLOCK_N=p["BLOCK_N"])
    grid = (cdiv(p["seq_len"], p["BLOCK_M"]), p["bh"])
    return Workload("sliding_window", t, ("q", "k", "v"), ("o",), (Launch("window", prog, grid, {n: n for n in t}),), p)
