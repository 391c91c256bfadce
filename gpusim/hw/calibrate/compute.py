"""Calibration stages of the compute side: tensor-core tiles, FP32 and SFU chains, per-op SIMT rates,
launch overhead, dot/SIMT overlap, and the GPU-wide CTA dispatch rate.

Each stage takes the ``Calibrator`` and records fields and measurements on it. The launch, SIMT-op,
overlap and CTA-dispatch stages run DSL microbenchmarks from ``ops`` through the Triton backend.
"""
from __future__ import annotations

import time

import numpy as np

from . import ops
from .bench import FMA_PER_ITER, launch_exp2, launch_fma, launch_mma
from .fit import launch_costs, stats
from .log import error_text, log


def _mma(cal, m, n, k, nw, dtype, flops_per_cta, rep_ms, repeats) -> dict:
    """FLOP/s of one tile shape: one CTA per SM repeating ``acc = tl.dot(a, b, acc)`` R times."""
    torch = cal.torch
    tdt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    a = (torch.randn(m, k, device=cal.dev) * 0.05).to(tdt)
    b = (torch.randn(k, n, device=cal.dev) * 0.05).to(tdt)
    grid = cal.sm_count
    c = torch.empty(grid * m * n, dtype=torch.float32, device=cal.dev)
    R = int(min(1 << 16, max(64, flops_per_cta / (2.0 * m * n * k))))
    launch_mma(a, b, c, 2, m, n, k, grid, nw, dtype == "fp32")
    cal.sync()
    ref = 2.0 * (a.float() @ b.float())
    got = c[: m * n].view(m, n)
    tol = 5e-2 if dtype == "fp32" else 1e-2
    # the Triton interpreter multiplies bf16 dot operands as raw bits: no check there
    if (cal.on_gpu or dtype != "bf16") and not torch.allclose(got, ref, rtol=tol, atol=tol * float(ref.abs().max())):
        raise RuntimeError(f"mma kernel result mismatch ({dtype} {m}x{n}x{k})")
    ms = cal.bench_ms(lambda: launch_mma(a, b, c, R, m, n, k, grid, nw, dtype == "fp32"), repeats,
                      rep_ms=rep_ms, warmup_ms=5)
    flops = 2.0 * m * n * k * R * grid
    r = stats([flops / (t * 1e-3) for t in ms])
    return {"m": m, "n": n, "k": k, "num_warps": nw, "dtype": dtype, "repeats": R, "flops_per_s": r["value"],
            "spread": r["spread"], "samples": r["samples"],
            "method": f"{grid} CTAs (one per SM), each acc = tl.dot(a, b, acc) R times on one {m}x{k} @ {k}x{n} "
                      f"{dtype} tile, {nw} warps; 2mnkR x CTAs / do_bench median"}


def tensor(cal) -> None:
    """fp16 tile sweep (peak and per-shape efficiency), then bf16 at the best shape and tf32."""
    p = cal.plan
    t0 = time.time()
    tiles = cal.raw["tiles"]
    skipped = []
    for i, (m, n, k, nw) in enumerate(p.tile_shapes):
        if time.time() - t0 > p.tile_budget_s or cal.past_deadline():
            skipped = p.tile_shapes[i:]
            break
        try:
            t = _mma(cal, m, n, k, nw, "fp16", p.tile_flops_per_cta, p.tile_rep_ms, p.curve_repeats)
            tiles.append(t)
            log(f"  fp16 {m:3d}x{n:3d}x{k:3d} w{nw}: {t['flops_per_s'] / 1e12:7.1f} TFLOP/s  (R={t['repeats']})")
        except Exception as e:
            tiles.append({"m": m, "n": n, "k": k, "num_warps": nw, "dtype": "fp16", "error": error_text(e)})
            log(f"  fp16 {m:3d}x{n:3d}x{k:3d} w{nw}: failed: {error_text(e)}")
    if skipped:
        cal.raw["errors"]["tensor_tiles_skipped"] = (f"time budget {p.tile_budget_s:.0f}s: skipped "
                                                     f"{len(skipped)} shapes: {list(skipped)}")
        log(f"tile sweep budget reached, {len(skipped)} shapes skipped")
    ok = [t for t in tiles if t.get("flops_per_s")]
    if not ok:
        raise RuntimeError("no tile shape ran")
    best = max(ok, key=lambda t: t["flops_per_s"])
    shape = f"{best['m']}x{best['n']}x{best['k']} w{best['num_warps']}"
    cal.field("tensor_flops_per_s.fp16", best["samples"],
              f"best fp16 tile of the sweep ({shape}): {best['method']}", "FLOP/s")
    log(f"fp16 peak {best['flops_per_s'] / 1e12:.1f} TFLOP/s at {shape}")
    for dtype, shapes in (("bf16", [(best["m"], best["n"], best["k"], best["num_warps"])]),
                          ("fp32", list(p.tf32_shapes))):
        for (m, n, k, nw) in shapes:
            try:
                t = _mma(cal, m, n, k, nw, dtype, p.tile_flops_per_cta, cal.plan.rep_ms, p.repeats)
            except Exception as e:
                cal.raw["errors"][f"tensor_{dtype}[{m}x{n}x{k} w{nw}]"] = error_text(e)
                continue
            tiles.append(t)
            name = "tf32 (fp32 operands, input_precision=tf32)" if dtype == "fp32" else dtype
            cal.field(f"tensor_flops_per_s.{dtype}", t["samples"], f"{name} at {m}x{n}x{k} w{nw}: {t['method']}",
                      "FLOP/s")
            log(f"{dtype} {m}x{n}x{k} w{nw}: {t['flops_per_s'] / 1e12:.1f} TFLOP/s")
            break


def simt(cal) -> None:
    """FP32 FLOP/s from FMA chains and SFU ops per clock per SM from exp2 chains."""
    torch, p = cal.torch, cal.plan
    grid, block = cal.sm_count * 8, 2048
    out = torch.empty(grid * block, dtype=torch.float32, device=cal.dev)
    iters = p.fma_iters
    launch_fma(out, 4, grid)
    cal.sync()
    ms = cal.bench_ms(lambda: launch_fma(out, iters, grid), p.repeats)
    flops = 2.0 * FMA_PER_ITER * iters * block * grid
    r = cal.field("fp32_flops_per_s", [flops / (t * 1e-3) for t in ms],
                  f"{grid} CTAs x 8 warps, 8 independent chains per thread of x = x*a + b ({FMA_PER_ITER * iters} "
                  f"steps), 2 FLOPs per FMA / do_bench median", "FLOP/s")
    log(f"FP32 {r['value'] / 1e12:.1f} TFLOP/s")
    iters = p.exp2_iters
    launch_exp2(out, 4, grid)
    cal.sync()
    if not bool(torch.isfinite(out).all()):
        raise RuntimeError("exp2 chain diverged")
    ms = cal.bench_ms(lambda: launch_exp2(out, iters, grid), p.repeats)
    n_ops = float(FMA_PER_ITER * iters * block * grid)
    per_clk = [n_ops / (t * 1e-3) / (cal.sm_count * cal.clock_hz) for t in ms]
    r = cal.field("sfu_ops_per_clk_per_sm", per_clk,
                  f"{grid} CTAs x 8 warps of x = exp2(x) * c chains ({FMA_PER_ITER * iters} steps, 8 per thread "
                  f"in parallel); exp2 ops/s / (sm_count x clock_hz)", "ops/clk/SM")
    log(f"exp2 {r['value']:.1f} ops/clk/SM")


def simt_ops(cal) -> None:
    """Per-op SIMT rates from the DSL op microbenchmarks of ``ops`` (through the Triton backend)."""
    rates, times = ops.measure(cal.sm_count, cal.clock_hz, log=log)
    # the method texts below name the module as it was called when configs/h200.yaml (then h200-measured.yaml) was
    # recorded ("gpusim.calibrate_ops", now ``ops``), so a re-run's sources compare equal to it
    cal.raw["simt_op_times_us"] = times
    how = (f"gpusim.calibrate_ops DSL microbenchmark (one fp32 {ops.ROWS}x{ops.COLS} tile "
           f"per CTA, {ops.CTAS_PER_SM} CTAs per SM, {ops.REPS} loop trips), "
           f"time_workload median; lane-ops / (sm_count x clock_hz x seconds)")
    for kind, rate in sorted(rates.items()):
        if kind == "sfu":
            cal.measurement("sfu_ops_per_clk_per_sm[calibrate_ops exp2]", [rate], how)
        else:
            cal.field(f"simt_lane_ops_per_clk_per_sm.{kind}", [rate], f"{how}, op class {kind}", "ops/clk/SM")
    missing = [k for k in ops.OP_KINDS if k not in times]
    if missing:
        cal.raw["errors"]["simt_ops_failed"] = f"op kinds that did not run: {missing}"


def launch(cal) -> None:
    """1..4 back-to-back launches of a tiny DSL kernel through the Triton backend (the path the
    validation harness times). With at most 4 launches the host enqueues them all while the GPU
    still runs do_bench's L2-clearing memset, so the line through T(k) is the GPU-side cost."""
    from ...backends import numpy_exec
    from ...backends.triton.run import allocate, launchers

    ks = (1, 2, 3, 4)
    meds = []
    for k in ks:
        w = ops.launch_workload(k)
        mem = allocate(w, numpy_exec.random_inputs(w, seed=2), cal.dev)
        fns = [f for _, f in launchers(w, mem)]

        def run(fns=fns):
            for f in fns:
                f()

        run()
        cal.sync()
        meds.append(float(np.median(cal.bench_ms(run, cal.plan.repeats))) * 1e3)
    per, fixed = launch_costs(ks, meds)
    cal.raw["launch_times_us"] = dict(zip(map(str, ks), meds))
    how = ("do_bench medians T(k) of k = 1..4 back-to-back launches of a 128-element DSL copy kernel "
           "through the Triton backend; per launch = min over k of (T(k) - T(1)) / (k - 1) (a host "
           "that falls behind only adds time), fixed = T(1) - per launch")
    r = cal.field("launch_overhead_us", [per], how, "us")
    s_ = cal.field("sync_overhead_us", [fixed], how, "us")
    log(f"launch overhead {r['value']:.2f} us, sync overhead {s_['value']:.2f} us")


def overlap(cal) -> None:
    """Does a CTA's dot overlap another resident CTA's SIMT work on one SM? (``ops.measure_overlap``)"""
    res = ops.measure_overlap(cal.sm_count, log=log)
    cal.raw["overlap_times_us"] = res["times_us"]
    cal.field("tensor_simt_overlap", [res["tensor_simt_overlap"]],
              "gpusim.calibrate_ops.measure_overlap: dot-only, SIMT-only and alternating CTAs at 1-3 per SM",
              "fraction")


def cta_dispatch(cal) -> None:
    """GPU-wide CTA dispatch cost: the slope of time against near-empty CTAs (``ops.measure_cta_dispatch``)."""
    res = ops.measure_cta_dispatch(cal.sm_count, log=log)
    cal.raw["cta_dispatch"] = res
    cal.field("cta_dispatch_ns", [res[k]["us_per_cta"] * 1e3 for k in res],
              "gpusim.calibrate_ops.measure_cta_dispatch: slope of time against the number of near-empty "
              "CTAs (8..64 waves, 1 and 4 warps)", "ns")
