"""Built-in kernels written in the tile DSL. Names and parameters are user-facing.

Each builder takes validated parameters and returns a ``Workload``: HBM tensors and the
sequence of launches. Tile sizes are compile-time constants, as in Triton.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..dsl import (LOG2E, arange, cdiv, dot, exp2, full, load, loop, maximum, program_id, store, tmax, trace, trans,
                  tsum, where, zeros)
from ..dsl.ir import Launch, TensorArg, Workload, emin

DTYPES = ("fp16", "bf16", "fp32")


@dataclass(frozen=True)
class Param:
    name: str
    kind: type            # int, bool or str
    default: object
    help: str
    choices: tuple = ()
    positive: bool = True


@dataclass(frozen=True)
class KernelSpec:
    name: str
    help: str
    params: tuple
    build: object

    def param(self, name):
        for p in self.params:
            if p.name == name:
                return p
        return None


def next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


COMMON = (Param("dtype", str, "fp16", "storage dtype of the HBM tensors", DTYPES),
          Param("num_warps", int, 4, "warps per CTA (Triton's num_warps)", (1, 2, 4, 8, 16, 32)))
ATTN_SHAPE = (Param("batch", int, 4, "batch size"), Param("heads", int, 16, "attention heads"),
              Param("seq_len", int, 4096, "sequence length N"), Param("head_dim", int, 64, "head dimension d"))


# --------------------------------------------------------------------------- DSL kernel bodies
def matmul_body(a, b, c, *, BLOCK_M, BLOCK_N, BLOCK_K, num_stages, trans_b=False, batched=False):
    """C[.., M, N] = A[.., M, K] @ B[.., K, N] (B given as [.., N, K] when trans_b)."""
    pm, pn = program_id(0), program_id(1)
    lead = (program_id(2),) if batched else ()
    K = a.shape[-1]

    def body(kk, acc):
        at = load(a, lead + (pm * BLOCK_M, kk), (BLOCK_M, BLOCK_K))
        if trans_b:
            bt = trans(load(b, lead + (pn * BLOCK_N, kk), (BLOCK_N, BLOCK_K)))
        else:
            bt = load(b, lead + (kk, pn * BLOCK_N), (BLOCK_K, BLOCK_N))
        return dot(at, bt, acc)

    (acc,) = loop(0, K, BLOCK_K, (zeros((BLOCK_M, BLOCK_N)),), body, stages=num_stages)
    store(c, lead + (pm * BLOCK_M, pn * BLOCK_N), acc)


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


def elementwise_body(x, y, *, BLOCK, ops):
    pid = program_id(0)
    t = load(x, (pid * BLOCK,), (BLOCK,))
    for op, val in ops:
        if op == "mul":
            t = t * val
        elif op == "add":
            t = t + val
        elif op == "relu":
            t = maximum(t, 0.0)
    store(y, (pid * BLOCK,), t)


# --------------------------------------------------------------------------- workload builders
def _attn_tensors(p):
    bh, n, d, dt = p["batch"] * p["heads"], p["seq_len"], p["head_dim"], p["dtype"]
    return {nm: TensorArg(nm, (bh, n, d), dt) for nm in ("q", "k", "v", "o")}


def build_flash(p) -> Workload:
    t = _attn_tensors(p)
    bm, bn, n = p["BLOCK_M"], p["BLOCK_N"], p["seq_len"]
    prog = trace(flash_body, "attention_flash", [t["q"], t["k"], t["v"], t["o"]], num_warps=p["num_warps"],
                 BLOCK_M=bm, BLOCK_N=bn, num_stages=p["num_stages"], causal=p["causal"],
                 sm_scale=1.0 / math.sqrt(p["head_dim"]))
    grid = (cdiv(n, bm), p["batch"] * p["heads"])
    launch = Launch("flash", prog, grid, {x: x for x in ("q", "k", "v", "o")})
    return Workload("attention_flash", t, ("q", "k", "v"), ("o",), (launch,), dict(p))


NAIVE_TILES = dict(BLOCK_M=128, BLOCK_N=64, BLOCK_K=64, num_stages=3)   # qk and pv GEMM tiles
SCALE_TILE = dict(BLOCK_R=32, BLOCK_C=128)


def build_naive(p) -> Workload:
    t = _attn_tensors(p)
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


ELEMENTWISE_OPS = (("mul", 1.5), ("add", 0.25), ("relu", None))


def _ew_tensors(p, names):
    return {nm: TensorArg(nm, (p["n"],), p["dtype"]) for nm in names}


def build_chain(p) -> Workload:
    t = _ew_tensors(p, ("x", "y1", "y2", "y"))
    launches = []
    src = "x"
    for i, (op, val) in enumerate(ELEMENTWISE_OPS):
        dst = ("y1", "y2", "y")[i]
        prog = trace(elementwise_body, op if op != "add" else "bias", [t[src], t[dst]], num_warps=p["num_warps"],
                     BLOCK=p["BLOCK"], ops=((op, val),))
        launches.append(Launch(prog.name, prog, (cdiv(p["n"], p["BLOCK"]),), {src: src, dst: dst}))
        src = dst
    return Workload("elementwise_chain", t, ("x",), ("y",), tuple(launches), dict(p))


def build_fused(p) -> Workload:
    t = _ew_tensors(p, ("x", "y"))
    prog = trace(elementwise_body, "fused", [t["x"], t["y"]], num_warps=p["num_warps"], BLOCK=p["BLOCK"],
                 ops=ELEMENTWISE_OPS)
    return Workload("elementwise_fused", t, ("x",), ("y",),
                    (Launch("fused", prog, (cdiv(p["n"], p["BLOCK"]),), {"x": "x", "y": "y"}),), dict(p))


def build_matmul(p) -> Workload:
    dt = p["dtype"]
    t = {"a": TensorArg("a", (p["M"], p["K"]), dt), "b": TensorArg("b", (p["K"], p["N"]), dt),
         "c": TensorArg("c", (p["M"], p["N"]), dt)}
    prog = trace(matmul_body, "matmul", [t["a"], t["b"], t["c"]], num_warps=p["num_warps"], BLOCK_M=p["BLOCK_M"],
                 BLOCK_N=p["BLOCK_N"], BLOCK_K=p["BLOCK_K"], num_stages=p["num_stages"])
    grid = (cdiv(p["M"], p["BLOCK_M"]), cdiv(p["N"], p["BLOCK_N"]))
    return Workload("matmul", t, ("a", "b"), ("c",), (Launch("matmul", prog, grid, {"a": "a", "b": "b", "c": "c"}),),
                    dict(p))


POW2 = tuple(2 ** i for i in range(4, 9))
KERNELS = {
    "attention_naive": KernelSpec("attention_naive", "four launches qk, scale, softmax, pv; S and P live in HBM",
                                  ATTN_SHAPE + (Param("causal", bool, False, "not supported (flash only)", positive=False),) + COMMON,
                                  build_naive),
    "attention_flash": KernelSpec("attention_flash", "one fused launch, tiled online softmax (FlashAttention forward)",
                                  ATTN_SHAPE + (Param("causal", bool, False, "causal mask; skips fully masked tiles", positive=False),
                                                Param("BLOCK_M", int, 128, "query rows per CTA", POW2),
                                                Param("BLOCK_N", int, 64, "key rows per loop iteration", POW2),
                                                Param("num_stages", int, 2, "software-pipelining depth", (1, 2, 3, 4, 5))) + COMMON,
                                  build_flash),
    "elementwise_chain": KernelSpec("elementwise_chain", "three launches: x*1.5, +0.25, relu",
                                    (Param("n", int, 1 << 24, "elements"),
                                     Param("BLOCK", int, 1024, "elements per CTA", tuple(2 ** i for i in range(7, 15)))) + COMMON,
                                    build_chain),
    "elementwise_fused": KernelSpec("elementwise_fused", "one launch doing x*1.5+0.25 then relu",
                                    (Param("n", int, 1 << 24, "elements"),
                                     Param("BLOCK", int, 1024, "elements per CTA", tuple(2 ** i for i in range(7, 15)))) + COMMON,
                                    build_fused),
    "matmul": KernelSpec("matmul", "tiled GEMM C = A B",
                         (Param("M", int, 4096, "rows of A and C"), Param("N", int, 4096, "columns of B and C"),
                          Param("K", int, 4096, "inner dimension"),
                          Param("BLOCK_M", int, 128, "C tile rows", POW2), Param("BLOCK_N", int, 128, "C tile columns", POW2),
                          Param("BLOCK_K", int, 64, "K step", POW2),
                          Param("num_stages", int, 3, "software-pipelining depth", (1, 2, 3, 4, 5))) + COMMON,
                         build_matmul),
}
ALL_PARAM_NAMES = tuple(dict.fromkeys(p.name for k in KERNELS.values() for p in k.params))


class KernelParamError(ValueError):
    """A kernel parameter is unknown or out of range; ``field`` names it."""

    def __init__(self, field, msg):
        super().__init__(msg)
        self.field = field


def resolve_params(kernel: str, given: dict) -> dict:
    """Fill defaults and validate; ignores keys the kernel does not take only if they are None."""
    if kernel not in KERNELS:
        import difflib

        close = difflib.get_close_matches(kernel, list(KERNELS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise KernelParamError("kernel", f"unknown kernel {kernel!r}{hint}; available: {', '.join(KERNELS)}")
    spec = KERNELS[kernel]
    out = {}
    for name, val in given.items():
        if spec.param(name) is None and val is not None:
            if name in ALL_PARAM_NAMES:
                continue   # a parameter of another kernel in the same sweep: not used here
            import difflib

            close = difflib.get_close_matches(name, [p.name for p in spec.params], n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise KernelParamError(name, f"{kernel} does not take parameter {name!r}{hint}; it takes "
                                         f"{', '.join(p.name for p in spec.params)}")
    for prm in spec.params:
        val = given.get(prm.name)
        if val is None:
            val = prm.default
        if prm.kind is bool:
            if not isinstance(val, bool):
                raise KernelParamError(prm.name, f"{prm.name} must be true or false, got {val!r}")
        elif prm.kind is int:
            if isinstance(val, bool) or not isinstance(val, int):
                raise KernelParamError(prm.name, f"{prm.name} must be an integer, got {val!r}")
            if prm.positive and val <= 0:
                raise KernelParamError(prm.name, f"{prm.name} must be a positive integer, got {val}")
        elif not isinstance(val, str):
            raise KernelParamError(prm.name, f"{prm.name} must be a string, got {val!r}")
        if prm.choices and val not in prm.choices:
            raise KernelParamError(prm.name, f"{prm.name} must be one of {', '.join(map(str, prm.choices))}, got {val!r}")
        out[prm.name] = val
    return out


def build(kernel: str, params: dict) -> Workload:
    p = resolve_params(kernel, params)
    return KERNELS[kernel].build(p)
