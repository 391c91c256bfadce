"""SwiGLU activation (Shazeer, 2020) of a fused gate/up projection: y = silu(g) * u, one row per program.

Run it:  gpusim kernels scenarios/kernels/swiglu.py
"""
import numpy as np

from gpusim.dsl import load, program_id, silu, store, trace
from gpusim.dsl.ir import Launch, TensorArg, Workload
from gpusim.kernels import Param, kernel, next_pow2


def reference(x, p):
    """float64 silu(gate) * up."""
    g = x["g"]
    return {"y": g / (1.0 + np.exp(-g)) * x["u"]}


def swiglu_body(g, u, y, *, BLOCK):
    row = program_id(0)
    gate = load(g, (row, 0), (1, BLOCK))
    up = load(u, (row, 0), (1, BLOCK)).to("fp32")
    store(y, (row, 0), silu(gate) * up)


@kernel(help="SwiGLU: silu(gate) * up, one row per program", reference=reference, params=(
    Param("rows", int, 4096, "rows (tokens)"), Param("cols", int, 14336, "FFN size"),
    Param("dtype", str, "bf16", "storage dtype", ("fp16", "bf16", "fp32")),
    Param("num_warps", int, 4, "warps per CTA", (1, 2, 4, 8, 16))))
def swiglu(p) -> Workload:
    shape = (p["rows"], p["cols"])
    t = {n: TensorArg(n, shape, p["dtype"]) for n in ("g", "u", "y")}
    prog = trace(swiglu_body, "swiglu", [t["g"], t["u"], t["y"]], num_warps=p["num_warps"], BLOCK=next_pow2(p["cols"]))
    return Workload("swiglu", t, ("g", "u"), ("y",), (Launch("swiglu", prog, (p["rows"],), {n: n for n in t}),), p)
