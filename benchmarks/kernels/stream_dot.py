"""The memory-level-parallelism microbenchmark of benchmarks/micro_fidelity.py (``mlp``) as a gpusim
kernel, so the simulator can predict the same launches the GPU timed: one CTA per SM streams
``trips`` tiles of BLOCK_N x D fp16 into ``acc = dot(q, k^T, acc)`` with a 16-row q."""
import numpy as np

from gpusim.dsl import dot, load, loop, program_id, store, trace, trans, zeros
from gpusim.dsl.ir import Launch, TensorArg, Workload
from gpusim.kernels import Param, kernel


def reference(x, p):
    ctas, trips, bn, d = p["ctas"], p["trips"], p["BLOCK_N"], p["D"]
    k = x["x"].reshape(ctas, trips, bn, d).sum(axis=1)
    return {"out": np.einsum("md,cnd->cmn", x["q"], k)}


def body(x, q, out, *, BLOCK_N, D, trips, stages):
    c = program_id(0)
    qt = load(q, (0, 0), (16, D))

    def step(i, acc):
        kt = load(x, (c, i, 0), (BLOCK_N, D))
        return (dot(qt, trans(kt), acc),)

    (acc,) = loop(0, trips * BLOCK_N, BLOCK_N, (zeros((16, BLOCK_N)),), step, stages=stages)
    store(out, (c, 0, 0), acc)


@kernel(help="one CTA per SM streaming tiles into a 16-row dot (micro_fidelity.py mlp)", reference=reference, params=(
    Param("ctas", int, 132, "CTAs (one per SM)"), Param("trips", int, 512, "tiles per CTA"),
    Param("BLOCK_N", int, 64, "tile rows"), Param("D", int, 128, "tile columns"),
    Param("num_stages", int, 2, "pipelining depth"), Param("num_warps", int, 4, "warps per CTA")))
def stream_dot(p) -> Workload:
    t = {"x": TensorArg("x", (p["ctas"], p["trips"] * p["BLOCK_N"], p["D"]), "fp16"),
         "q": TensorArg("q", (16, p["D"]), "fp16"),
         "out": TensorArg("out", (p["ctas"], 16, p["BLOCK_N"]), "fp32")}
    prog = trace(body, "stream_dot", [t["x"], t["q"], t["out"]], num_warps=p["num_warps"],
                 BLOCK_N=p["BLOCK_N"], D=p["D"], trips=p["trips"], stages=p["num_stages"])
    return Workload("stream_dot", t, ("x", "q"), ("out",), (Launch("stream_dot", prog, (p["ctas"],),
                                                                   {n: n for n in t}),), p)
