"""What a register spill costs, as a gpusim kernel: each of ``ctas`` CTAs loads ``per_thread`` fp32
values per thread (1-D tiles of power-of-two sizes that add up to it), keeps them all live across
``iters`` iterations of ``x = x * a + b`` (one FFMA per value, each independent of the others) and
stores them. Past 255 registers per thread ptxas keeps the rest in local memory, so every iteration
reloads and stores them (LDL / STL in the loop); below it the loop is pure FFMA issue. Each value's
reload sits on its own FFMA's chain, so this is the spill's latency and bandwidth with nothing else
in the loop. Timed on a GPU by ``gpusim validate benchmarks/kernels/spill_live.yaml``."""
import numpy as np

from gpusim.dsl import load, loop, program_id, store, trace
from gpusim.dsl.ir import Launch, TensorArg, Workload
from gpusim.kernels import Param, kernel

A, B = 0.999, 0.001


def reference(x, p):
    v = x["x"].astype(np.float64)
    for _ in range(p["iters"]):
        v = v * A + B
    return {"out": v}


def parts(per_thread: int, threads: int) -> list:
    """The power-of-two tiles (in elements per CTA) whose sum is ``per_thread * threads``."""
    n, out, bit = per_thread, [], 1
    while n:
        if n & bit:
            out.append(bit * threads)
            n -= bit
        bit <<= 1
    return out[::-1]


def body(x, out, *, BLOCKS, iters):
    c = program_id(0)
    total = sum(BLOCKS)
    offs = [sum(BLOCKS[:k]) for k in range(len(BLOCKS))]
    vs = tuple(load(x, (c * total + o,), (b,)) for o, b in zip(offs, BLOCKS))

    def step(i, *vs):
        return tuple(v * A + B for v in vs)

    vs = loop(0, iters, 1, vs, step)
    for o, v in zip(offs, vs):
        store(out, (c * total + o,), v)


@kernel(help="each CTA keeps per_thread fp32 values per thread live across a loop of one FFMA each (spills past 255 registers)",
        reference=reference, params=(
            Param("ctas", int, 132, "CTAs (132: one per SM)"), Param("per_thread", int, 256, "live fp32 values per thread"),
            Param("iters", int, 1024, "loop iterations"),
            Param("num_warps", int, 4, "warps per CTA")))
def spill_live(p) -> Workload:
    threads = 32 * p["num_warps"]
    if p["per_thread"] < 1 or threads & (threads - 1):
        raise ValueError(f"per_thread must be >= 1 and num_warps a power of two (got {p['per_thread']}, {p['num_warps']})")
    blocks = tuple(parts(p["per_thread"], threads))
    n = p["ctas"] * sum(blocks)
    t = {"x": TensorArg("x", (n,), "fp32"), "out": TensorArg("out", (n,), "fp32")}
    prog = trace(body, "spill_live", [t["x"], t["out"]], num_warps=p["num_warps"], BLOCKS=blocks, iters=p["iters"])
    return Workload("spill_live", t, ("x",), ("out",), (Launch("spill_live", prog, (p["ctas"],), {k: k for k in t}),), p)
