"""What a contiguous tile's round trip is, as a gpusim kernel: ``ctas`` CTAs each stream their own
``rows``-row block of a row-major fp16 matrix (``width`` columns: one tile row is ``2 * width``
bytes and the next tile row follows it), BLOCK_N rows at a time, into ``acc = dot(q, k^T, acc)``
with a 16-row q. Each tile is one contiguous block of ``BLOCK_N * width * 2`` bytes, as
flash-decoding's K and V tiles are; ``stream_cols`` streams tiles of the same size made of row
pieces 16 KiB apart. At 2 stages nothing is in flight ahead, so the time per tile is its round trip
plus the dot. Timed on a GPU by ``gpusim validate benchmarks/kernels/stream_rows.yaml``."""
import numpy as np

from gpusim.dsl import dot, load, loop, program_id, store, trace, trans, zeros
from gpusim.dsl.ir import Launch, TensorArg, Workload
from gpusim.kernels import Param, kernel


def reference(x, p):
    ctas, bn, rows, w = p["ctas"], p["BLOCK_N"], p["rows"], p["width"]
    k = x["k"].astype(np.float64).reshape(ctas, rows // bn, bn, w).sum(axis=1)
    return {"out": np.einsum("mk,cnk->cmn", x["q"].astype(np.float64), k)}


def body(q, k, out, *, BLOCK_N, width, rows, stages):
    c = program_id(0)
    qt = load(q, (0, 0), (16, width))

    def step(i, acc):
        kt = load(k, (c * rows + i, 0), (BLOCK_N, width))
        return (dot(qt, trans(kt), acc),)

    (acc,) = loop(0, rows, BLOCK_N, (zeros((16, BLOCK_N)),), step, stages=stages)
    store(out, (c, 0, 0), acc)


def _check(p):
    if p["rows"] % p["BLOCK_N"]:
        raise ValueError(f"rows={p['rows']} must be a multiple of BLOCK_N={p['BLOCK_N']}")


@kernel(help="each CTA streams its own contiguous block of an HBM-resident matrix, BLOCK_N whole rows at a time, into a 16-row dot",
        reference=reference, params=(
            Param("ctas", int, 132, "CTAs (132: one per SM)"), Param("rows", int, 8192, "rows streamed per CTA"),
            Param("width", int, 64, "columns (one tile row is 2 * width bytes, rows abut)"),
            Param("BLOCK_N", int, 32, "tile rows"),
            Param("num_stages", int, 2, "pipelining depth"), Param("num_warps", int, 4, "warps per CTA")))
def stream_rows(p) -> Workload:
    _check(p)
    t = {"q": TensorArg("q", (16, p["width"]), "fp16"),
         "k": TensorArg("k", (p["ctas"] * p["rows"], p["width"]), "fp16"),
         "out": TensorArg("out", (p["ctas"], 16, p["BLOCK_N"]), "fp32")}
    prog = trace(body, "stream_rows", [t["q"], t["k"], t["out"]], num_warps=p["num_warps"],
                 BLOCK_N=p["BLOCK_N"], width=p["width"], rows=p["rows"], stages=p["num_stages"])
    return Workload("stream_rows", t, ("q", "k"), ("out",), (Launch("stream_rows", prog, (p["ctas"],),
                                                                    {x: x for x in t}),), p)
