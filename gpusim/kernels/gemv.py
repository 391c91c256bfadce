"""gemv_splitk: a skinny GEMM for few rows (a decode step's projections), K split over CTAs.

``C[M, N] = A[M, K] @ W[N, K]^T`` with the weight stored as a linear layer stores it (one row of K
values per output column). At decode ``M`` is the batch (1..16): the tiled ``matmul`` then has one
row-block of CTAs, one per ``BLOCK_N`` columns, each streaming all of K on its own, and too few
bytes are in flight to keep HBM busy. Here K is also split into ``SPLIT_K`` chunks, each its own
CTA (grid: column blocks x splits x row blocks), which writes an fp32 partial sum; a second launch
adds the splits up and casts to the output dtype (``SPLIT_K`` 1: one launch writes C directly).

Every W byte is read once. The A rows are padded to ``BLOCK_M`` (at least 16, the tensor-core dot's
least row count) by masked loads, which move no bytes; the dot's wasted rows cost tensor cycles
only, which a memory-bound GEMV has to spare.
"""
from __future__ import annotations

from ..dsl import cdiv, dot, load, loop, program_id, store, trace, trans, zeros
from ..dsl.ir import Launch, TensorArg, Workload, emin
from .spec import COMMON, POW2, Param, kernel, next_pow2, register_kernel

REDUCE_BLOCK = 256      # output columns per CTA of the split-reduce launch


def gemv_split_body(a, w, out, *, BLOCK_M, BLOCK_N, BLOCK_K, num_stages, chunk, split_out):
    """One (column block, K chunk, row block): the partial A[rows, chunk] @ W[cols, chunk]^T."""
    pn, split, pm = program_id(0), program_id(1), program_id(2)
    K = a.shape[1]

    def body(kk, acc):
        at = load(a, (pm * BLOCK_M, kk), (BLOCK_M, BLOCK_K))
        wt = load(w, (pn * BLOCK_N, kk), (BLOCK_N, BLOCK_K))
        return (dot(at, trans(wt), acc),)

    (acc,) = loop(split * chunk, emin(K, (split + 1) * chunk), BLOCK_K, (zeros((BLOCK_M, BLOCK_N)),), body,
                  stages=num_stages)
    if split_out:
        store(out, (split, pm * BLOCK_M, pn * BLOCK_N), acc)
    else:
        store(out, (pm * BLOCK_M, pn * BLOCK_N), acc)


def gemv_reduce_body(part, c, *, BLOCK_M, BLOCK_R):
    """C[rows, cols] = the sum over splits of the fp32 partials, in the output dtype."""
    pn, pm = program_id(0), program_id(1)
    splits = part.shape[0]

    def body(s, acc):
        return (acc + load(part, (s, pm * BLOCK_M, pn * BLOCK_R), (BLOCK_M, BLOCK_R)),)

    (acc,) = loop(0, splits, 1, (zeros((BLOCK_M, BLOCK_R)),), body)
    store(c, (pm * BLOCK_M, pn * BLOCK_R), acc)


def split_plan(K: int, split_k: int, block_k: int) -> tuple:
    """(chunk, splits): K values per split (a multiple of BLOCK_K) and the number of non-empty splits."""
    chunk = cdiv(cdiv(K, split_k), block_k) * block_k
    return chunk, cdiv(K, chunk)


def gemv_reference(x, p):
    return {"c": x["a"] @ x["w"].T}


@register_kernel
@kernel(name="gemv_splitk", help="skinny GEMM C = A W^T (W as [N, K]) for few rows, K split over CTAs",
        reference=gemv_reference, params=(
            Param("M", int, 1, "rows of A and C (the batch at decode)"),
            Param("N", int, 4096, "columns of C, rows of W"),
            Param("K", int, 4096, "inner dimension"),
            Param("BLOCK_M", int, 16, "A rows per CTA (masked past M)", POW2),
            Param("BLOCK_N", int, 64, "C columns (W rows) per CTA", POW2),
            Param("BLOCK_K", int, 128, "K step", POW2),
            Param("SPLIT_K", int, 4, "CTAs K is split over; 1: one launch, no partials"),
            Param("num_stages", int, 3, "software-pipelining depth", (1, 2, 3, 4, 5))) + COMMON)
def gemv_splitk(p) -> Workload:
    M, N, K, dt = p["M"], p["N"], p["K"], p["dtype"]
    bm = min(p["BLOCK_M"], max(16, next_pow2(M)))
    chunk, splits = split_plan(K, p["SPLIT_K"], p["BLOCK_K"])
    t = {"a": TensorArg("a", (M, K), dt), "w": TensorArg("w", (N, K), dt), "c": TensorArg("c", (M, N), dt)}
    grid = (cdiv(N, p["BLOCK_N"]), splits, cdiv(M, bm))
    kw = dict(num_warps=p["num_warps"], BLOCK_M=bm, BLOCK_N=p["BLOCK_N"], BLOCK_K=p["BLOCK_K"],
              num_stages=p["num_stages"], chunk=chunk)
    if splits == 1:
        prog = trace(gemv_split_body, "gemv", [t["a"], t["w"], t["c"]], split_out=False, **kw)
        launches = (Launch("gemv", prog, grid, {"a": "a", "w": "w", "c": "c"}),)
    else:
        t["part"] = TensorArg("part", (splits, M, N), "fp32")
        split = trace(gemv_split_body, "gemv_split", [t["a"], t["w"], t["part"]], split_out=True, **kw)
        br = min(REDUCE_BLOCK, next_pow2(N))
        reduce = trace(gemv_reduce_body, "gemv_reduce", [t["part"], t["c"]], num_warps=4, BLOCK_M=bm, BLOCK_R=br)
        launches = (Launch("gemv_split", split, grid, {"a": "a", "w": "w", "part": "part"}),
                    Launch("gemv_reduce", reduce, (cdiv(N, br), cdiv(M, bm)), {"part": "part", "c": "c"}))
    return Workload("gemv_splitk", t, ("a", "w"), ("c",), launches, dict(p))
