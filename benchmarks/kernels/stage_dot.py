"""Staging a tile into shared memory at each row alignment, as a gpusim kernel: ``ctas`` CTAs each
stream ``trips`` tiles of BLOCK_N x D fp16 from one L2-resident matrix whose rows are ``D + pad``
elements apart into ``acc = dot(q, k^T, acc)`` with a 16-row q (so the loop is bound by getting
the tile into shared memory, not by the dot). With rows a multiple of 16 bytes apart Triton copies
the tile with 16-byte cp.async; with rows 8, 4 or 2 bytes apart it cannot prove the wide access
aligned and copies it narrower (an odd pitch falls back to 2-byte global loads and shared stores).
Timed on a GPU by ``gpusim validate benchmarks/kernels/stage_dot.yaml``; the cycles per tile against
the pad give the staging rate at each access width (docs/model.md, "Vector width")."""
import numpy as np

from gpusim.dsl import dot, load, loop, store, trace, trans, zeros
from gpusim.dsl.ir import Launch, TensorArg, Workload
from gpusim.kernels import Param, kernel


def reference(x, p):
    d, bn, trips = p["D"], p["BLOCK_N"], p["trips"]
    k = x["k"][:, :d].astype(np.float64).reshape(trips, bn, d).sum(axis=0)
    acc = x["q"].astype(np.float64) @ k.T
    return {"out": np.broadcast_to(acc, (p["ctas"],) + acc.shape).copy()}


def body(q, k, out, *, BLOCK_N, D, trips, stages):
    from gpusim.dsl import program_id

    c = program_id(0)
    qt = load(q, (0, 0), (16, D))

    def step(i, acc):
        kt = load(k, (i, 0), (BLOCK_N, D))
        return (dot(qt, trans(kt), acc),)

    (acc,) = loop(0, trips * BLOCK_N, BLOCK_N, (zeros((16, BLOCK_N)),), step, stages=stages)
    store(out, (c, 0, 0), acc)


@kernel(help="tiles staged into shared memory from rows D + pad elements apart (L2-resident), into a 16-row dot",
        reference=reference, params=(
            Param("ctas", int, 132, "CTAs (132: one per SM)"), Param("trips", int, 256, "tiles per CTA"),
            Param("BLOCK_N", int, 64, "tile rows"), Param("D", int, 128, "tile columns"),
            Param("pad", int, 0, "extra elements per row of the matrix (its pitch is D + pad)", positive=False),
            Param("num_stages", int, 3, "pipelining depth"), Param("num_warps", int, 4, "warps per CTA")))
def stage_dot(p) -> Workload:
    n = p["trips"] * p["BLOCK_N"]
    t = {"q": TensorArg("q", (16, p["D"]), "fp16"),
         "k": TensorArg("k", (n, p["D"] + p["pad"]), "fp16"),
         "out": TensorArg("out", (p["ctas"], 16, p["BLOCK_N"]), "fp32")}
    prog = trace(body, "stage_dot", [t["q"], t["k"], t["out"]], num_warps=p["num_warps"],
                 BLOCK_N=p["BLOCK_N"], D=p["D"], trips=p["trips"], stages=p["num_stages"])
    return Workload("stage_dot", t, ("q", "k"), ("out",), (Launch("stage_dot", prog, (p["ctas"],),
                                                                  {x: x for x in t}),), p)
