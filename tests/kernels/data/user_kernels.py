"""A user kernel file for the tests: a kernel named like a built-in family (attention_*) whose
reference differs from plain attention, and a non-kernel attribute."""
import numpy as np

from gpusim.dsl import cdiv, load, program_id, store, trace
from gpusim.dsl.ir import Launch, TensorArg, Workload
from gpusim.kernels import COMMON, Param, kernel

NOT_A_KERNEL = 3


def _double_body(x, y, *, BLOCK):
    pid = program_id(0)
    store(y, (pid * BLOCK,), load(x, (pid * BLOCK,), (BLOCK,)) * 2.0)


@kernel(name="attention_double", help="y = 2 x (named attention_* on purpose)",
        params=(Param("n", int, 256, "elements"), Param("scale", float, 2.0, "unused by the body")) + COMMON,
        reference=lambda x, p: {"y": 2.0 * x["x"]})
def double(p):
    t = {nm: TensorArg(nm, (p["n"],), p["dtype"]) for nm in ("x", "y")}
    prog = trace(_double_body, "double", [t["x"], t["y"]], BLOCK=128)
    return Workload("attention_double", t, ("x",), ("y",), (Launch("double", prog, (cdiv(p["n"], 128),),
                                                                   {"x": "x", "y": "y"}),), dict(p))
