"""Per-op SIMT throughput, measured with DSL microbenchmarks lowered through the Triton backend.

Each microbenchmark is a tiny DSL kernel: a CTA loads one fp32 tile and applies a single IR op
kind ``REPS`` times in a loop (the tile is loop-carried, so nothing can be hoisted), then stores
it. Timing it gives the lane-ops per clock per SM that the GPU sustains for exactly the
instructions Triton emits for that IR op (a NaN-propagating ``maximum``, a ``where``, a
round-trip ``cast``, a row ``sum``...). The timing model charges each op kind its measured rate.
These kernels are not the attention, matmul or elementwise kernels the model is judged on.
"""
from __future__ import annotations

import math

from .dsl import cast, exp2, full, load, loop, maximum, program_id, store, trace, tmax, tsum, where
from .dsl.ir import Launch, TensorArg, Workload

ROWS, COLS = 64, 64
REPS = 512
CTAS_PER_SM = 8          # 8 CTAs x 4 warps = 32 warps per SM: enough to hide pipe latency

# op kind -> (IR ops one iteration issues per element of the tile, body builder)
OP_KINDS = ("mul", "add", "maximum", "compare_where", "cast", "exp2", "reduce_sum", "reduce_max")


def _body(kind):
    def step(i, t):
        if kind == "mul":
            return (t * 1.0001,)
        if kind == "add":
            return (t + 0.5,)
        if kind == "maximum":
            return (maximum(t, -3.0 + 0.0),)
        if kind == "compare_where":
            return (where(t > 0.25, t, -t),)
        if kind == "cast":
            return (cast(cast(t, "fp16"), "fp32"),)
        if kind == "exp2":
            return (exp2(t * -1.0),)                      # stays in (0, 1]
        if kind == "reduce_sum":
            return (t - tsum(t, 1)[:, None] * (1.0 / COLS),)   # mean-centred: stays bounded
        if kind == "reduce_max":
            return (t - tmax(t, 1)[:, None],)
        raise ValueError(kind)
    return step


# IR ops per element per iteration, by kind, that the measured time pays for
OPS_PER_ELEMENT = {"mul": {"mul": 1}, "add": {"add": 1}, "maximum": {"maximum": 1},
                   "compare_where": {"compare": 1, "where": 1, "neg": 1}, "cast": {"cast": 2},
                   "exp2": {"exp2": 1, "mul": 1}, "reduce_sum": {"reduce": 1, "add": 1},
                   "reduce_max": {"reduce": 1, "add": 1}}


def op_workload(kind: str, sm_count: int, reps: int = REPS) -> Workload:
    grid = sm_count * CTAS_PER_SM
    x = TensorArg("x", (grid * ROWS, COLS), "fp32")
    y = TensorArg("y", (grid * ROWS, COLS), "fp32")

    def kern(x, y):
        pid = program_id(0)
        t = load(x, (pid * ROWS, 0), (ROWS, COLS)) * 0.001
        (t,) = loop(0, reps, 1, (t,), _body(kind))
        store(y, (pid * ROWS, 0), t)

    prog = trace(kern, f"opbench_{kind}", [x, y], num_warps=4)
    return Workload(f"opbench_{kind}", {"x": x, "y": y}, ("x",), ("y",),
                    (Launch(prog.name, prog, (grid,), {"x": "x", "y": "y"}),), {"kind": kind})


def rates_from_times(times_us: dict, sm_count: int, clock_hz: float, reps: int = REPS) -> dict:
    """Lane-ops per clock per SM for each IR op class, solving the per-kind times in order:
    plain kinds first, then kinds whose iteration also pays for an op measured on its own."""
    elems = sm_count * CTAS_PER_SM * ROWS * COLS * reps
    cycles = {k: t * 1e-6 * clock_hz * sm_count for k, t in times_us.items() if t and t > 0}   # SM-cycles
    rate = {}
    for k in ("mul", "add", "maximum", "cast"):
        if k in cycles:
            rate[k] = elems * sum(OPS_PER_ELEMENT[k].values()) / cycles[k]
    if "exp2" in cycles:
        # the special-function pipe is the bottleneck; the multiply issues alongside it
        rate["sfu"] = elems / cycles["exp2"]
    if "compare_where" in cycles and "mul" in rate:
        # compare + where + a negation (costed like a mul): the remainder is compare+where
        rest = cycles["compare_where"] - elems / rate["mul"]
        if rest > 0:
            rate["compare_where"] = 2 * elems / rest
    for k in ("reduce_sum", "reduce_max"):
        if k in cycles and "add" in rate:
            rest = cycles[k] - elems / rate["add"]
            if rest > 0:
                rate[k.replace("reduce_", "reduce_")] = elems / rest
    return {k: float(v) for k, v in rate.items() if math.isfinite(v)}


def measure(sm_count: int, clock_hz: float, log=print) -> tuple:
    """Run every op microbenchmark on the GPU; returns (rates, raw times in us)."""
    import numpy as np

    from .backends import numpy_exec
    from .backends.triton_backend import run_workload, time_workload

    times = {}
    for kind in OP_KINDS:
        try:
            w = op_workload(kind, sm_count)
            inputs = numpy_exec.random_inputs(w, seed=1)
            out = run_workload(w, inputs)["y"]
            if not np.all(np.isfinite(out)):
                log(f"  op {kind}: non-finite output, timing anyway")
            t = time_workload(w, inputs, reps_ms=60, warmup_ms=10)["total_us"]
            times[kind] = t
            log(f"  op {kind:14s} {t:9.1f} us")
        except Exception as e:  # record and go on: a missing rate falls back to the datasheet model
            log(f"  op {kind}: failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    return rates_from_times(times, sm_count, clock_hz), times
