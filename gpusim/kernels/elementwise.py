"""Elementwise built-ins: the same three ops as three launches (``elementwise_chain``) or fused
into one (``elementwise_fused``)."""
from __future__ import annotations

import numpy as np

from ..dsl import cdiv, load, maximum, program_id, store, trace
from ..dsl.ir import Launch, TensorArg, Workload
from .spec import COMMON, Param, kernel, register_kernel

ELEMENTWISE_OPS = (("mul", 1.5), ("add", 0.25), ("relu", None))


def elementwise_body(x, y, *, BLOCK, ops):
    pid = program_id(0)
    t = load(x, (pid * BLOCK,), (BLOCK,))
    for op, val in ops:
        if op == "mul":
            t = t * val
        elif op == "add":
            t = t + val
        elif op == "relu":
            t = maximum(t, 0.0)
    store(y, (pid * BLOCK,), t)


def elementwise_reference(x, p):
    return {"y": np.maximum(x["x"] * 1.5 + 0.25, 0.0)}


def _tensors(p, names):
    return {nm: TensorArg(nm, (p["n"],), p["dtype"]) for nm in names}


EW_PARAMS = (Param("n", int, 1 << 24, "elements"),
             Param("BLOCK", int, 1024, "elements per CTA", tuple(2 ** i for i in range(7, 15)))) + COMMON


@register_kernel
@kernel(name="elementwise_chain", help="three launches: x*1.5, +0.25, relu", params=EW_PARAMS,
        reference=elementwise_reference)
def elementwise_chain(p) -> Workload:
    t = _tensors(p, ("x", "y1", "y2", "y"))
    launches = []
    src = "x"
    for i, (op, val) in enumerate(ELEMENTWISE_OPS):
        dst = ("y1", "y2", "y")[i]
        prog = trace(elementwise_body, op if op != "add" else "bias", [t[src], t[dst]], num_warps=p["num_warps"],
                     BLOCK=p["BLOCK"], ops=((op, val),))
        launches.append(Launch(prog.name, prog, (cdiv(p["n"], p["BLOCK"]),), {src: src, dst: dst}))
        src = dst
    return Workload("elementwise_chain", t, ("x",), ("y",), tuple(launches), dict(p))


@register_kernel
@kernel(name="elementwise_fused", help="one launch doing x*1.5+0.25 then relu", params=EW_PARAMS,
        reference=elementwise_reference)
def elementwise_fused(p) -> Workload:
    t = _tensors(p, ("x", "y"))
    prog = trace(elementwise_body, "fused", [t["x"], t["y"]], num_warps=p["num_warps"], BLOCK=p["BLOCK"],
                 ops=ELEMENTWISE_OPS)
    return Workload("elementwise_fused", t, ("x",), ("y",),
                    (Launch("fused", prog, (cdiv(p["n"], p["BLOCK"]),), {"x": "x", "y": "y"}),), dict(p))
