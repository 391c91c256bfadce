"""Row-wise kernels over a (rows, cols) matrix: softmax, layernorm and rmsnorm.

One CTA per row. When the row fits in one tile (``BLOCK >= cols``) it is loaded once, reduced in
registers and written once: one HBM read and one write per element, the least possible. A longer
row is streamed in ``BLOCK``-wide chunks: softmax then makes two passes (an online max/sum pass,
as in Milakov and Gimelshein 2018, then a normalising pass), layernorm three (mean, centred
variance, normalise; as Triton's layer-norm tutorial does) and rmsnorm two.
Statistics are accumulated in fp32 whatever the storage dtype.
"""
from __future__ import annotations

import math

import numpy as np

from ..dsl import LOG2E, arange, exp2, full, load, loop, maximum, program_id, rsqrt, store, tmax, trace, tsum, where, zeros
from ..dsl.ir import Launch, TensorArg, Workload
from .spec import COMMON, Param, kernel, next_pow2, register_kernel

# A row held in one tile costs BLOCK / (32 num_warps) fp32 registers per thread per live copy; the
# one-tile path keeps about three copies (the row, its exponentials or centred values, the output),
# so 64 per copy (192 of a thread's 255) is the widest row a CTA holds without spilling.
ROW_REGS_PER_THREAD = 64


# --------------------------------------------------------------------------- softmax
def softmax_rows_body(x, y, *, BLOCK, num_stages):
    """y[r, :] = softmax(x[r, :]), one row per program."""
    row = program_id(0)
    n = x.shape[1]
    if BLOCK >= n:
        t = load(x, (row, 0), (BLOCK,), other=-math.inf).to("fp32")
        e = exp2((t - tmax(t, 0)) * LOG2E)
        store(y, (row, 0), e / tsum(e, 0))
        return

    def stats(i, m_i, l_i):      # lane-wise online max and rescaled sum
        t = load(x, (row, i), (BLOCK,), other=-math.inf).to("fp32")
        m_new = maximum(m_i, t)
        return m_new, l_i * exp2((m_i - m_new) * LOG2E) + exp2((t - m_new) * LOG2E)

    m_i, l_i = loop(0, n, BLOCK, (full((BLOCK,), -math.inf), zeros((BLOCK,))), stats, stages=num_stages)
    m = tmax(m_i, 0)                 # every lane saw a real element in the first chunk (n > BLOCK)
    inv = 1.0 / tsum(l_i * exp2((m_i - m) * LOG2E), 0)

    def normalise(i):
        t = load(x, (row, i), (BLOCK,)).to("fp32")
        store(y, (row, i), exp2((t - m) * LOG2E) * inv)
        return ()

    loop(0, n, BLOCK, (), normalise, stages=num_stages)


# --------------------------------------------------------------------------- layernorm / rmsnorm
def _row_sum(x, row, n, BLOCK, stages, f):
    """sum over the row of f(x) (fp32), streamed in BLOCK chunks; f gets (chunk, in-bounds mask)."""
    def body(i, acc):
        t = load(x, (row, i), (BLOCK,)).to("fp32")
        return (acc + f(t, arange(i, BLOCK) < n),)

    (acc,) = loop(0, n, BLOCK, (zeros((BLOCK,)),), body, stages=stages)
    return tsum(acc, 0)


def layernorm_body(x, w, b, y, *, BLOCK, num_stages, eps):
    """y = (x - mean) / sqrt(var + eps) * w + b over each row (biased variance, as torch does)."""
    row = program_id(0)
    n = x.shape[1]
    if BLOCK >= n:
        t = load(x, (row, 0), (BLOCK,)).to("fp32")
        mean = tsum(t, 0) * (1.0 / n)
        xc = where(arange(0, BLOCK) < n, t - mean, 0.0)
        rstd = rsqrt(tsum(xc * xc, 0) * (1.0 / n) + eps)
        wt, bt = load(w, (0,), (BLOCK,)), load(b, (0,), (BLOCK,))
        store(y, (row, 0), xc * rstd * wt + bt)
        return
    mean = _row_sum(x, row, n, BLOCK, num_stages, lambda t, ok: t) * (1.0 / n)

    def centred_sq(t, ok):
        d = where(ok, t - mean, 0.0)
        return d * d

    rstd = rsqrt(_row_sum(x, row, n, BLOCK, num_stages, centred_sq) * (1.0 / n) + eps)

    def normalise(i):
        t = load(x, (row, i), (BLOCK,)).to("fp32")
        wt, bt = load(w, (i,), (BLOCK,)), load(b, (i,), (BLOCK,))
        store(y, (row, i), (t - mean) * rstd * wt + bt)
        return ()

    loop(0, n, BLOCK, (), normalise, stages=num_stages)


def rmsnorm_body(x, w, y, *, BLOCK, num_stages, eps):
    """y = x / sqrt(mean(x^2) + eps) * w over each row."""
    row = program_id(0)
    n = x.shape[1]
    if BLOCK >= n:
        t = load(x, (row, 0), (BLOCK,)).to("fp32")
        rstd = rsqrt(tsum(t * t, 0) * (1.0 / n) + eps)
        store(y, (row, 0), t * rstd * load(w, (0,), (BLOCK,)))
        return
    rstd = rsqrt(_row_sum(x, row, n, BLOCK, num_stages, lambda t, ok: t * t) * (1.0 / n) + eps)

    def normalise(i):
        t = load(x, (row, i), (BLOCK,)).to("fp32")
        store(y, (row, i), t * rstd * load(w, (i,), (BLOCK,)))
        return ()

    loop(0, n, BLOCK, (), normalise, stages=num_stages)


# --------------------------------------------------------------------------- workloads
def row_block(p) -> int:
    """The tile width: BLOCK when given, else the whole row (next power of two) when it fits in
    registers, else the widest tile that does (then the row is streamed in several passes)."""
    if p["BLOCK"]:
        return p["BLOCK"]
    return min(next_pow2(p["cols"]), 32 * p["num_warps"] * ROW_REGS_PER_THREAD)


def _rows_workload(name, body, p, vectors, **consts):
    rows, cols, dt = p["rows"], p["cols"], p["dtype"]
    t = {"x": TensorArg("x", (rows, cols), dt)}
    t.update({nm: TensorArg(nm, (cols,), dt) for nm in vectors})
    t["y"] = TensorArg("y", (rows, cols), dt)
    prog = trace(body, name, list(t.values()), num_warps=p["num_warps"], BLOCK=row_block(p),
                 num_stages=p["num_stages"], **consts)
    launch = Launch(name, prog, (rows,), {nm: nm for nm in t})
    return Workload(name, t, ("x",) + tuple(vectors), ("y",), (launch,), dict(p))


# --------------------------------------------------------------------------- float64 references
def softmax_reference(inputs: dict, p: dict) -> dict:
    x = np.asarray(inputs["x"], dtype=np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return {"y": e / e.sum(axis=-1, keepdims=True)}


def layernorm_reference(inputs: dict, p: dict) -> dict:
    x, w, b = (np.asarray(inputs[k], dtype=np.float64) for k in ("x", "w", "b"))
    xc = x - x.mean(axis=-1, keepdims=True)
    return {"y": xc / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + p["eps"]) * w + b}


def rmsnorm_reference(inputs: dict, p: dict) -> dict:
    x, w = (np.asarray(inputs[k], dtype=np.float64) for k in ("x", "w"))
    return {"y": x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + p["eps"]) * w}


ROWS = (Param("rows", int, 4096, "rows (one CTA each)"), Param("cols", int, 4096, "columns (the reduced axis)"),
        Param("BLOCK", int, 0, "columns per tile; 0: the whole row when it fits in registers, else streamed",
              (0,) + tuple(2 ** i for i in range(4, 17)), positive=False),
        Param("num_stages", int, 2, "software-pipelining depth of the streamed passes", (1, 2, 3, 4, 5)))
EPS = (Param("eps", float, 1e-5, "added to the variance (layernorm) or mean square (rmsnorm) under the root"),)


@register_kernel
@kernel(name="softmax", help="row softmax, one CTA per row (one HBM read when the row fits in a tile, else two)",
        reference=softmax_reference, params=ROWS + COMMON)
def softmax(p) -> Workload:
    return _rows_workload("softmax", softmax_rows_body, p, ())


@register_kernel
@kernel(name="layernorm", help="layer norm with weight and bias, one CTA per row (three passes when streamed)",
        reference=layernorm_reference, params=ROWS + EPS + COMMON)
def layernorm(p) -> Workload:
    return _rows_workload("layernorm", layernorm_body, p, ("w", "b"), eps=p["eps"])


@register_kernel
@kernel(name="rmsnorm", help="RMS norm with weight, one CTA per row (two passes when streamed)",
        reference=rmsnorm_reference, params=ROWS + EPS + COMMON)
def rmsnorm(p) -> Workload:
    return _rows_workload("rmsnorm", rmsnorm_body, p, ("w",), eps=p["eps"])
