# A kernel with a mistake, for docs/write-your-own-kernel.md: Python's `if` on a tile.
from gpusim.dsl import load, program_id, store, trace
from gpusim.dsl.ir import Launch, TensorArg, Workload
from gpusim.kernels import Param, kernel
def relu_body(x, y, *, BLOCK):
    i = program_id(0)
    t = load(x, (i * BLOCK,), (BLOCK,))
    if t > 0:                                       # line 8: a tile has no truth value
        store(y, (i * BLOCK,), t)


@kernel(help="ReLU, written wrong", params=(Param("n", int, 1 << 20, "elements"),))
def relu(p) -> Workload:
    t = {"x": TensorArg("x", (p["n"],), "fp16"), "y": TensorArg("y", (p["n"],), "fp16")}
    prog = trace(relu_body, "relu", [t["x"], t["y"]], BLOCK=1024)
    return Workload("relu", t, ("x",), ("y",), (Launch("relu", prog, (p["n"] // 1024,), {n: n for n in t}),), p)
