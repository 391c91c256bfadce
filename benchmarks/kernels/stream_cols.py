"""How much of an L2 line a miss brings in, as a gpusim kernel: ``ctas`` CTAs each stream their own
BLOCK_N-row panel of a row-major fp16 matrix (in HBM: 138 MB at the defaults) along its columns,
BLOCK_K columns at a time, into ``acc = dot(q, k^T, acc)`` with a 16-row q: the A operand of a GEMM
whose K loop walks 64-byte tile rows at BLOCK_K 32, half a 128-byte L2 line.

If a miss fetched the whole line, the next iteration's tile would find its half in the L2 and wait
the L2's latency; if the L2 fetches only the 32-byte sectors a request asks for, every iteration
waits for the HBM. ``pad`` elements at the end of each row shift every other row by ``pad * 2``
bytes (pad 32: rows start half a line apart, so each 128-byte tile row covers parts of two lines).
Timed on a GPU by ``gpusim validate benchmarks/kernels/stream_cols.yaml``; the L2 sector hits and
misses by ``benchmarks/ncu_probe.py``."""
import numpy as np

from gpusim.dsl import dot, load, loop, program_id, store, trace, trans, zeros
from gpusim.dsl.ir import Launch, TensorArg, Workload
from gpusim.kernels import Param, kernel


def reference(x, p):
    ctas, bn, bk, cols = p["ctas"], p["BLOCK_N"], p["BLOCK_K"], p["cols"]
    k = x["k"][:, :cols].astype(np.float64).reshape(ctas, bn, cols // bk, bk).sum(axis=2)
    return {"out": np.einsum("mk,cnk->cmn", x["q"].astype(np.float64), k)}


def body(q, k, out, *, BLOCK_N, BLOCK_K, cols, stages):
    c = program_id(0)
    qt = load(q, (0, 0), (16, BLOCK_K))

    def step(i, acc):
        kt = load(k, (c * BLOCK_N, i), (BLOCK_N, BLOCK_K))
        return (dot(qt, trans(kt), acc),)

    (acc,) = loop(0, cols, BLOCK_K, (zeros((16, BLOCK_N)),), step, stages=stages)
    store(out, (c, 0, 0), acc)


@kernel(help="each CTA streams its own panel of an HBM-resident matrix along the columns, BLOCK_K at a time, into a 16-row dot",
        reference=reference, params=(
            Param("ctas", int, 132, "CTAs (132: one per SM)"), Param("cols", int, 8192, "columns streamed per row"),
            Param("BLOCK_N", int, 64, "tile rows"), Param("BLOCK_K", int, 32, "tile columns (the K step)"),
            Param("pad", int, 0, "extra elements per row (the pitch is cols + pad)", positive=False),
            Param("num_stages", int, 2, "pipelining depth"), Param("num_warps", int, 4, "warps per CTA")))
def stream_cols(p) -> Workload:
    t = {"q": TensorArg("q", (16, p["BLOCK_K"]), "fp16"),
         "k": TensorArg("k", (p["ctas"] * p["BLOCK_N"], p["cols"] + p["pad"]), "fp16"),
         "out": TensorArg("out", (p["ctas"], 16, p["BLOCK_N"]), "fp32")}
    prog = trace(body, "stream_cols", [t["q"], t["k"], t["out"]], num_warps=p["num_warps"],
                 BLOCK_N=p["BLOCK_N"], BLOCK_K=p["BLOCK_K"], cols=p["cols"], stages=p["num_stages"])
    return Workload("stream_cols", t, ("q", "k"), ("out",), (Launch("stream_cols", prog, (p["ctas"],),
                                                                    {x: x for x in t}),), p)
