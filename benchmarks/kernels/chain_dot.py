"""A chained-dot microbenchmark as a gpusim kernel: the loop of flash attention without its softmax,
``S = Q K_i^T`` then ``acc += S.to(fp16) V_i``, ``ctas`` CTAs each walking ``trips`` K/V tiles of a
small region every CTA shares (L2-resident, so the loop is bound by its two dots). It isolates what
Triton's compiler does with a dot whose result feeds the next dot's A operand from registers: with
8 warps on a 64-row tile the two warpgroups cannot split the rows (a wgmma covers 64), so each one
computes the whole ``Q K^T`` tile. Timed on a GPU by ``gpusim validate`` on
``benchmarks/kernels/chain_dot.yaml`` and predicted by the simulator from the same IR."""
import numpy as np

from gpusim.dsl import dot, load, loop, program_id, store, trace, trans, zeros
from gpusim.dsl.ir import Launch, TensorArg, Workload
from gpusim.kernels import Param, kernel


def reference(x, p):
    q, k, v = (x[n].astype(np.float64) for n in "qkv")
    bn, trips = p["BLOCK_N"], p["trips"]
    acc = np.zeros((p["BLOCK_M"], p["D"]))
    for i in range(trips):
        j = i * bn
        s = q @ k[j:j + bn].T
        acc += s.astype(np.float16).astype(np.float64) @ v[j:j + bn]
    return {"out": np.broadcast_to(acc, (p["ctas"],) + acc.shape).copy()}


def body(q, k, v, out, *, BLOCK_M, BLOCK_N, D, trips, stages):
    c = program_id(0)
    qt = load(q, (0, 0), (BLOCK_M, D))

    def step(i, acc):
        kt = load(k, (i, 0), (BLOCK_N, D))
        s = dot(qt, trans(kt))
        vt = load(v, (i, 0), (BLOCK_N, D))
        return (dot(s.to("fp16"), vt, acc),)

    (acc,) = loop(0, trips * BLOCK_N, BLOCK_N, (zeros((BLOCK_M, D)),), step, stages=stages)
    store(out, (c, 0, 0), acc)


@kernel(help="chained dots S = Q K^T, acc += S V over L2-resident tiles (flash's loop without softmax)",
        reference=reference, params=(
            Param("ctas", int, 132, "CTAs (one per SM)"), Param("trips", int, 256, "K/V tiles per CTA"),
            Param("BLOCK_M", int, 64, "query rows"), Param("BLOCK_N", int, 64, "key rows per tile"),
            Param("D", int, 128, "head dimension"), Param("num_stages", int, 3, "pipelining depth"),
            Param("num_warps", int, 4, "warps per CTA")))
def chain_dot(p) -> Workload:
    n = p["trips"] * p["BLOCK_N"]
    t = {"q": TensorArg("q", (p["BLOCK_M"], p["D"]), "fp16"),
         "k": TensorArg("k", (n, p["D"]), "fp16"),
         "v": TensorArg("v", (n, p["D"]), "fp16"),
         "out": TensorArg("out", (p["ctas"], p["BLOCK_M"], p["D"]), "fp32")}
    prog = trace(body, "chain_dot", [t["q"], t["k"], t["v"], t["out"]], num_warps=p["num_warps"],
                 BLOCK_M=p["BLOCK_M"], BLOCK_N=p["BLOCK_N"], D=p["D"], trips=p["trips"], stages=p["num_stages"])
    return Workload("chain_dot", t, ("q", "k", "v"), ("out",),
                    (Launch("chain_dot", prog, (p["ctas"],), {x: x for x in t}),), p)
