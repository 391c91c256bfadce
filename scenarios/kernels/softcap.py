"""Gemma-2 logit soft-capping: y = cap * tanh(x / cap), one row per program.

Run it:  gpusim kernels scenarios/kernels/softcap.py
         gpusim run scenarios/examples/softcap.yaml
"""
import numpy as np

from gpusim.dsl import load, program_id, store, tanh, trace
from gpusim.dsl.ir import Launch, TensorArg, Workload
from gpusim.kernels import Param, kernel, next_pow2


def reference(x, p):
    """float64 soft-capping of every element."""
    return {"y": p["cap"] * np.tanh(x["x"] / p["cap"])}


def softcap_body(x, y, *, BLOCK, cap):
    row = program_id(0)
    t = load(x, (row, 0), (1, BLOCK)).to("fp32")
    store(y, (row, 0), cap * tanh(t / cap))


@kernel(help="logit soft-capping cap * tanh(x / cap), one row per program", reference=reference, params=(
    Param("rows", int, 4096, "rows (tokens)"), Param("cols", int, 32768, "columns (vocabulary)"),
    Param("cap", float, 30.0, "soft cap (Gemma-2 uses 30 for logits, 50 for attention scores)"),
    Param("dtype", str, "fp16", "storage dtype", ("fp16", "bf16", "fp32")),
    Param("num_warps", int, 4, "warps per CTA", (1, 2, 4, 8, 16))))
def softcap(p) -> Workload:
    t = {"x": TensorArg("x", (p["rows"], p["cols"]), p["dtype"]), "y": TensorArg("y", (p["rows"], p["cols"]), p["dtype"])}
    prog = trace(softcap_body, "softcap", [t["x"], t["y"]], num_warps=p["num_warps"],
                 BLOCK=next_pow2(p["cols"]), cap=p["cap"])
    return Workload("softcap", t, ("x",), ("y",), (Launch("softcap", prog, (p["rows"],), {n: n for n in t}),), p)
