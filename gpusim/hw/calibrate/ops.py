"""DSL microbenchmarks lowered through the Triton backend: per-op SIMT throughput, launch costs,
dot/SIMT overlap, CTA dispatch and isolated DRAM segments (``gpusim calibrate --ops OUT.json``
runs them on their own; the full calibration runs the first four as stages).

Per-op SIMT throughput: each microbenchmark is a tiny DSL kernel: a CTA loads one fp32 tile and applies a single IR op
kind ``REPS`` times in a loop (the tile is loop-carried, so nothing can be hoisted), then stores
it. Timing it gives the lane-ops per clock per SM that the GPU sustains for exactly the
instructions Triton emits for that IR op (a NaN-propagating ``maximum``, a ``where``, a
round-trip ``cast``, a row ``sum``...). The timing model charges each op kind its measured rate.
These kernels are not the attention, matmul or elementwise kernels the model is judged on.
"""
from __future__ import annotations

import math

from ...dsl import cast, exp2, full, load, loop, maximum, program_id, store, trace, tmax, tsum, where
from ...dsl.ir import Launch, TensorArg, Workload
from .fit import launch_costs

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
            return (maximum(t * -1.0, t + -0.5),)          # the two inputs change every trip
        if kind == "compare_where":
            return (where(t > 0.25, t, -t),)
        if kind == "cast":
            return (cast(cast(t * 1.0001, "fp16"), "fp32"),)   # a round trip the compiler cannot fold
        if kind == "exp2":
            return (exp2(t * -1.0),)                      # stays in (0, 1]
        if kind == "reduce_sum":
            return (t - tsum(t, 1)[:, None] * (1.0 / COLS),)   # mean-centred: stays bounded
        if kind == "reduce_max":
            return (t - tmax(t, 1)[:, None],)
        raise ValueError(kind)
    return step


# IR ops per element per iteration, by kind, that the measured time pays for
OPS_PER_ELEMENT = {"mul": {"mul": 1}, "add": {"add": 1}, "maximum": {"maximum": 1, "mul": 1, "add": 1},
                   "compare_where": {"compare": 1, "where": 1, "neg": 1}, "cast": {"cast": 2, "mul": 1},
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
    for k in ("mul", "add"):
        if k in cycles:
            rate[k] = elems / cycles[k]
    for k, n_ops in (("maximum", 1), ("cast", 2)):
        # these iterations also pay for a multiply (and an add): subtract the measured costs
        if k in cycles and "mul" in rate and "add" in rate:
            rest = cycles[k] - elems / rate["mul"] - (elems / rate["add"] if k == "maximum" else 0.0)
            if rest > 0:
                rate[k] = n_ops * elems / rest
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

    from ...backends import numpy_exec
    from ...backends.triton.run import run_workload, time_workload

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


def launch_workload(k: int) -> Workload:
    # (k is kept small in measure_launch so the host enqueues every launch while the GPU is still
    # busy with do_bench's L2-clearing memset: then the timed region sees only the GPU-side cost)
    """``k`` back-to-back launches of a one-CTA DSL kernel that copies 128 elements."""
    x = TensorArg("x", (128,), "fp32")
    y = TensorArg("y", (128,), "fp32")

    def kern(x, y):
        store(y, (0,), load(x, (0,), (128,)))

    prog = trace(kern, "tiny", [x, y], num_warps=1)
    return Workload(f"launch_x{k}", {"x": x, "y": y}, ("x",), ("y",),
                    tuple(Launch(f"tiny{i}", prog, (1,), {"x": "x", "y": "y"}) for i in range(k)), {"k": k})


def measure_launch(ks=(1, 2, 3, 4), repeats: int = 5, log=print) -> dict:
    """Launch overhead as the validation harness sees it: the same Triton launcher and do_bench
    (see ``launch_costs``)."""
    import statistics

    from ...backends import numpy_exec
    from ...backends.triton.run import run_workload, time_workload

    t = {}
    for n in ks:
        w = launch_workload(n)
        inputs = numpy_exec.random_inputs(w, seed=2)
        run_workload(w, inputs)
        t[n] = [time_workload(w, inputs, reps_ms=50, warmup_ms=10)["total_us"] for _ in range(repeats)]
    med = [statistics.median(t[n]) for n in ks]
    per, fixed = launch_costs(ks, med)
    out = {"ks": list(ks), "t_us": {str(n): t[n] for n in ks}, "median_us": med,
           "launch_overhead_us": per, "sync_overhead_us": fixed}
    log(f"launch: medians {', '.join(f'{m:.2f}' for m in med)} us for {list(ks)} launches -> "
        f"{per:.2f} us per launch, {fixed:.2f} us fixed")
    return out


def _mix_kernel():
    """measure_overlap's kernel: a dot loop, a SIMT loop, or both alternating (``MODE``)."""
    import triton
    import triton.language as tl

    @triton.jit
    def mix_kernel(a_ptr, b_ptr, x_ptr, out_ptr, R, MODE: tl.constexpr, B: tl.constexpr):
        # MODE 0: dot loop; 1: SIMT loop; 3: both alternating, independent chains;
        # 4: both alternating, each step needing the other's result (FlashAttention's chain)
        pid = tl.program_id(0)
        offs = tl.arange(0, B)
        idx = offs[:, None] * B + offs[None, :]
        a = tl.load(a_ptr + idx)
        b = tl.load(b_ptr + idx)
        x = tl.load(x_ptr + idx)
        acc = tl.zeros((B, B), dtype=tl.float32)
        for _ in range(R):
            if MODE != 1:
                acc = tl.dot(a, b, acc)
            if MODE == 4:
                x = tl.exp2(acc * -0.001 + x * 0.5) * 0.5
                a = x.to(tl.float16)
            elif MODE != 0:
                x = tl.exp2(x * -0.5 + 0.25) * 0.5
        tl.store(out_ptr + pid * B * B + idx, acc + x)

    return mix_kernel


def measure_overlap(sm_count: int, reps: int = 2048, log=print) -> dict:
    """Does one CTA's ``dot`` overlap another resident CTA's SIMT work on the same SM?

    One hand-written kernel. d and s: one CTA per SM running only a dot loop or only a
    softmax-like SIMT loop (FMA + exp2). Then CTAs that alternate both every iteration (the
    FlashAttention pattern), 1, 2 and 3 per SM. overlap = 1 when two CTAs' dot and SIMT steps run
    side by side, 0 when their times add (formula below)."""
    import statistics

    import torch
    from triton.testing import do_bench

    mix_kernel = _mix_kernel()

    B = 64
    dev = "cuda"
    a = torch.randn(B, B, device=dev, dtype=torch.float16)
    b = torch.randn(B, B, device=dev, dtype=torch.float16)
    x = torch.randn(B, B, device=dev, dtype=torch.float32)
    out = torch.empty(3 * sm_count * B * B, device=dev, dtype=torch.float32)
    times = {}
    # one CTA per SM of each kind alone, then one of each kind per SM together (and two of a kind)
    for mode, name, grid in ((0, "dot_1cta", sm_count), (1, "simt_1cta", sm_count), (3, "both_1cta", sm_count),
                             (3, "both_2cta", 2 * sm_count), (3, "both_3cta", 3 * sm_count),
                             (4, "dependent_1cta", sm_count), (4, "dependent_2cta", 2 * sm_count),
                             (4, "dependent_3cta", 3 * sm_count)):
        def fn(mode=mode, grid=grid):
            mix_kernel[(grid,)](a, b, x, out, reps, MODE=mode, B=B, num_warps=4)
        fn()
        torch.cuda.synchronize()
        times[name] = statistics.median(do_bench(fn, warmup=10, rep=60) for _ in range(3)) * 1e3
    # two CTAs per SM, each alternating a dot (d) and a SIMT step (s): with overlap o the SM needs
    # max(2d + 2(1-o)s, 2s + 2(1-o)d, d + s); solve the larger branch for o
    d, s_ = times["dot_1cta"], times["simt_1cta"]
    lo, hi = min(d, s_), max(d, s_)
    overlap = min(1.0, max(0.0, 1.0 - (times["both_2cta"] - 2 * hi) / (2 * lo)))
    log("overlap: " + ", ".join(f"{k} {v:.1f} us" for k, v in times.items()) + f" -> overlap {overlap:.2f}")
    # recorded, not used: with dependent chains (MODE 4) one CTA alone is latency-bound, and two
    # CTAs per SM overlap more than any pipe-sharing overlap can express (docs/history.md, round 1)
    return {"times_us": times, "tensor_simt_overlap": overlap}


SEG_ROWS, SEG_COLS, SEG_BR = 8192, 8192, 64
SEG_WIDTHS = (64, 128, 256, 512)      # fp16 elements per row segment: 128 B .. 1 KiB


def segment_workload(mode: str, width: int) -> Workload:
    """Read or write a [8192, 8192] fp16 tensor in (64 x width) tiles, row blocks fastest, so the
    CTAs of one wave touch many rows of the same column band: each tile row is an isolated
    ``2 * width``-byte DRAM segment (the access pattern of the naive schedule's S tiles)."""
    nr, nc = SEG_ROWS // SEG_BR, SEG_COLS // width
    x = TensorArg("x", (SEG_ROWS, SEG_COLS), "fp16")
    s = TensorArg("s", (nr * nc, SEG_BR), "fp32")

    if mode == "read":
        def kern(x, s):
            r, c = program_id(0), program_id(1)
            t = load(x, (r * SEG_BR, c * width), (SEG_BR, width))
            store(s, (c * nr + r, 0), tsum(t, 1))
        params, ins, outs = [x, s], ("x",), ("s",)
    else:
        def kern(x):
            r, c = program_id(0), program_id(1)
            store(x, (r * SEG_BR, c * width), full((SEG_BR, width), 1.0, "fp16"))
        params, ins, outs = [x], (), ("x",)
    prog = trace(kern, f"seg_{mode}_{width}", params, num_warps=4)
    tensors = {t.name: t for t in params}
    return Workload(prog.name, tensors, ins, outs,
                    (Launch(prog.name, prog, (nr, nc), {t.name: t.name for t in params}),), {"width": width})


def measure_segments(log=print) -> dict:
    """DRAM bandwidth (bytes / s) for isolated row segments of 128 B .. 1 KiB, reads and writes."""
    from ...backends import numpy_exec
    from ...backends.triton.run import run_workload, time_workload

    out = {}
    for mode in ("read", "write"):
        for w in SEG_WIDTHS:
            wl = segment_workload(mode, w)
            inputs = numpy_exec.random_inputs(wl, seed=3)
            run_workload(wl, inputs)
            t = time_workload(wl, inputs, reps_ms=60, warmup_ms=10)["total_us"]
            bw = SEG_ROWS * SEG_COLS * 2 / (t * 1e-6)
            out[f"{mode}_{2 * w}"] = bw
            log(f"  segments {mode} {2 * w:5d} B: {t:8.1f} us, {bw / 1e12:.2f} TB/s")
    return out


def cta_workload(n_ctas: int, num_warps: int) -> Workload:
    """``n_ctas`` CTAs that each copy 32 fp32 values: almost no work, so time measures CTA dispatch."""
    x = TensorArg("x", (n_ctas * 32,), "fp32")
    y = TensorArg("y", (n_ctas * 32,), "fp32")

    def kern(x, y):
        pid = program_id(0)
        store(y, (pid * 32,), load(x, (pid * 32,), (32,)))

    prog = trace(kern, f"ctas_w{num_warps}", [x, y], num_warps=num_warps)
    return Workload(prog.name, {"x": x, "y": y}, ("x",), ("y",),
                    (Launch(prog.name, prog, (n_ctas,), {"x": "x", "y": "y"}),), {"n": n_ctas})


def measure_cta_dispatch(sm_count: int, log=print) -> dict:
    """Time of launches of 8..64 waves of near-empty CTAs, for 1 and 4 warps per CTA. The slope of
    time against CTA count is the cost of one CTA; comparing the two widths tells whether it is a
    per-slot cost (scales with how many CTAs an SM holds) or a GPU-wide dispatch rate."""
    import numpy as np

    from ...backends import numpy_exec
    from ...backends.triton.run import run_workload, time_workload

    out = {}
    for nw in (1, 4):
        ns, ts = [], []
        for waves in (8, 16, 32, 64):
            n = sm_count * 16 * waves
            wl = cta_workload(n, nw)
            inputs = numpy_exec.random_inputs(wl, seed=4)
            run_workload(wl, inputs)
            t = time_workload(wl, inputs, reps_ms=60, warmup_ms=10)["total_us"]
            ns.append(n)
            ts.append(t)
            log(f"  ctas: {n:7d} CTAs x {nw} warps: {t:8.1f} us")
        slope, icpt = np.polyfit(np.array(ns, float), np.array(ts), 1)
        out[f"warps{nw}"] = {"n": ns, "t_us": ts, "us_per_cta": float(slope), "intercept_us": float(icpt)}
        log(f"  ctas: {nw} warps: {slope * 1e3:.3f} ns per CTA GPU-wide")
    return out
