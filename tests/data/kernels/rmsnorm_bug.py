"""RMSNorm with a deliberate bug (the weight w is never applied): the numpy check must fail.

The whole row is one tile (BLOCK = the next power of two >= cols, masked past the end), so x is
read from HBM once: a memory-bound kernel, about 2 * rows * cols * bytes of traffic.

Run it:  gpusim kernels scenarios/kernels/rmsnorm.py
         gpusim run scenarios/examples/rmsnorm.yaml
"""
import numpy as np

from gpusim.dsl import load, program_id, rsqrt, store, trace, tsum
from gpusim.dsl.ir import Launch, TensorArg, Workload
from gpusim.kernels import Param, kernel, next_pow2


def reference(x, p):
    """float64 RMSNorm of every row of x, scaled by w."""
    ms = np.mean(x["x"] ** 2, axis=-1, keepdims=True)
    return {"y": x["x"] / np.sqrt(ms + p["eps"]) * x["w"][None, :]}


def rmsnorm_body(x, w, y, *, BLOCK, eps):
    row = program_id(0)
    cols = x.shape[1]
    t = load(x, (row, 0), (1, BLOCK)).to("fp32")                    # the whole row; reads 0.0 past the end
    ms = tsum(t * t, 1) / cols                                      # mean of squares, fp32
    scale = load(w, (0,), (BLOCK,)).to("fp32")[None, :]
    store(y, (row, 0), t * rsqrt(ms + eps)[:, None])   # BUG (deliberate): the weight w is never applied


@kernel(help="RMSNorm over the last axis, one row per program", reference=reference, params=(
    Param("rows", int, 4096, "rows (tokens)"), Param("cols", int, 4096, "hidden size"),
    Param("eps", float, 1e-6, "added to the mean square"),
    Param("dtype", str, "fp16", "storage dtype", ("fp16", "bf16", "fp32")),
    Param("num_warps", int, 4, "warps per CTA", (1, 2, 4, 8, 16))))
def rms_norm(p) -> Workload:
    t = {"x": TensorArg("x", (p["rows"], p["cols"]), p["dtype"]), "w": TensorArg("w", (p["cols"],), p["dtype"]),
         "y": TensorArg("y", (p["rows"], p["cols"]), p["dtype"])}
    prog = trace(rmsnorm_body, "rms_norm", [t["x"], t["w"], t["y"]], num_warps=p["num_warps"],
                 BLOCK=next_pow2(p["cols"]), eps=p["eps"])
    return Workload("rms_norm", t, ("x", "w"), ("y",), (Launch("rms_norm", prog, (p["rows"],), {n: n for n in t}),), p)
