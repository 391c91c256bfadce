"""The calibration layer's inputs: a simulated point's own breakdown, as dimensionless features.

``breakdown(result)`` is the JSON-able record of one mechanistic simulation (the point's
utilisation of each resource, and per launch every field of its ``KernelResult``: cycles, busy
fractions, waves, CTAs per SM and the limit that binds, spills, DRAM/L2 bytes, clock). The
recorder keeps these records beside the measured times (``benchmarks/sim_points.py``), and the
package computes the same record for every new point, so training and prediction read one thing.

``features(b)`` turns a record into numbers that are dimensionless or relative to the GPU's own
limits (utilisations, busy fractions, waves, the arithmetic intensity over the ridge point, log
cycles, the GPU's ridge point and HBM-to-L2 bandwidth ratio), never a kernel's name. ``STRUCTURE`` is the subset that no GPU resource changes (warps,
stages, spills, launches, element size): the transferred model reads only these, so a what-if of
any resource cannot move its factor.
"""
from __future__ import annotations

import dataclasses
import math

LIMITERS = ("registers", "sram", "warps", "ctas")
COMPILED = ("registers", "instructions", "loop_instructions", "global_accesses", "narrow_accesses", "spill_bytes",
            "register_rounds")
STRUCTURE = ("num_warps", "num_stages", "spills", "launches", "elem_bytes", "log2_align_bytes", "log2_elems_per_thread",
             "log2_accesses_per_thread", "log2_registers", "log2_acc_per_thread", *(f"log2_sass_{x}" for x in COMPILED))
FEATURES = ("u_pipe", "u_dram", "u_l2", "u_sms", "tensor_busy", "vector_busy", "sfu_busy", "l2_hit", "log2_waves",
            "tail", "ctas_per_sm", "log2_ai_over_ridge", "log10_cycles", "clock_ratio", "sampled_share",
            *(f"limiter_{x}" for x in LIMITERS), "log2_ridge", "hbm_over_l2", *STRUCTURE)
ELEM_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4, "fp8e4m3": 1, "fp8e5m2": 1, "fp8": 1}


def compiled_structure(workload, cfg) -> dict | None:
    """The compiled kernels' counts (``COMPILED``, the most over the launches): registers per thread,
    SASS instructions (all and inside loops), global loads and stores (and those under 4 bytes),
    spill bytes, and the LDG -> STS round trips of a staged copy (``staging.register_rounds``), all
    static counts of the listing; None where the compiler's view is the estimate (no triton, a
    config without a compute capability, a kernel that does not compile)."""
    from ..backends.sim.staging import register_rounds
    from ..compiler.view import compiled

    out = dict.fromkeys(COMPILED, 0.0)
    for launch in workload.launches:
        c = compiled(launch.program, cfg, launch.grid)
        if c is None:
            return None
        sass, loop = dict(c.sass), dict(c.sass_loop)
        widths = list(c.global_load_widths) + list(c.global_store_widths)
        counts = {"registers": c.registers_per_thread,
                  "instructions": sum(v for k, v in sass.items() if "." not in k),
                  "loop_instructions": sum(v for k, v in loop.items() if "." not in k),
                  "global_accesses": sum(n for _, n in widths),
                  "narrow_accesses": sum(n for w, n in widths if w < 4),
                  "spill_bytes": c.spill_store_bytes + c.spill_load_bytes,
                  "register_rounds": max([register_rounds(b) for b in c.loop_bodies or ()] + [1.0])}
        out = {k: max(out[k], float(v)) for k, v in counts.items()}
    return out


def workload_structure(workload, cfg=None) -> dict:
    """Numbers of a built workload no GPU resource changes: ``align_bytes``, the largest power of
    two (up to 16) dividing every HBM tensor's contiguous row in bytes (what Triton can prove
    aligned, and so how wide it loads); ``elems_per_thread``, the most tile elements one launch
    loads or stores per thread (how much work each thread carries); ``registers``, the most
    registers per thread any launch needs by the analytic estimate (uncapped: over 255 it spills);
    ``acc_per_thread``, the most ``dot`` accumulator elements per thread (a GEMM tile's register
    pressure); ``compiled``, ``compiled_structure`` on ``cfg`` (None without a config)."""
    from ..backends.sim.cost import cta_resources
    from ..dsl import ir

    align = 16
    for t in workload.tensors.values():
        row = (t.shape[-1] if t.shape else 1) * ir.DTYPE_BYTES[t.dtype]
        align = min(align, row & -row if row else 16)
    per_thread, registers, acc = 1.0, 1, 1.0
    for launch in workload.launches:
        prog = launch.program
        ops = list(ir.walk(prog.body))
        elems = sum(op.out.numel if isinstance(op, ir.Load) else op.value.numel
                    for op in ops if isinstance(op, (ir.Load, ir.Store)))
        per_thread = max(per_thread, elems / (32 * prog.num_warps))
        registers = max(registers, cta_resources(prog).registers_per_thread)
        acc = max([acc] + [op.out.numel / (32 * prog.num_warps) for op in ops if isinstance(op, ir.Dot)])
    return {"align_bytes": align, "elems_per_thread": per_thread, "registers": registers, "acc_per_thread": acc,
            "compiled": compiled_structure(workload, cfg) if cfg is not None else None}


def breakdown(r, workload=None, cfg=None) -> dict:
    """The JSON-able breakdown of one simulated ``gpusim.Result`` (mechanistic time) and, with its
    ``workload``, that workload's structure (``workload_structure`` on ``cfg``)."""
    out = {"status": r.status, "reason": r.reason[:300], "time_us": r.time_us, "clock_hz": r.clock_hz,
           "sm_count": r.sm_count, "hbm_bandwidth_bytes_per_s": r.hbm_bandwidth_bytes_per_s,
           "l2_bandwidth_bytes_per_s": r.l2_bandwidth_bytes_per_s, "peak_flops_per_s": r.peak_flops_per_s,
           "ridge_flop_per_byte": r.ridge_flop_per_byte, "sim_wall_s": r.sim_wall_s}
    if r.status in ("ok", "unphysical", "mismatch") and r.time_us:
        out.update(compiler=r.compiler, utilisation=r.utilisation(), flops=r.flops, dram_bytes=r.dram_bytes,
                   kernels=[dataclasses.asdict(k) for k in r.kernels])
    if workload is not None:
        out["structure"] = workload_structure(workload, cfg)
    return out


def _weighted(ks: list, field: str, w: list) -> float:
    tot = sum(w)
    return sum(float(k.get(field) or 0.0) * x for k, x in zip(ks, w)) / tot if tot else 0.0


def features(b: dict, params: dict) -> dict:
    """Feature name -> value of one breakdown record ``b`` of a point with kernel ``params``."""
    ks = b["kernels"]
    w = [max(float(k["time_us"]), 1e-9) for k in ks]
    u = b["utilisation"]
    main = ks[max(range(len(ks)), key=lambda i: w[i])]          # the launch that takes the most time
    ai = b["flops"] / b["dram_bytes"] if b["dram_bytes"] else 1e6
    ridge = b.get("ridge_flop_per_byte") or 1.0
    waves = _weighted(ks, "waves", w)
    sampled = sum(k["simulated_ctas"] for k in ks) / max(1, sum(k["total_ctas"] for k in ks))
    clocks = [k.get("clock_hz") or b["clock_hz"] for k in ks]
    f = {"u_pipe": u["pipe"], "u_dram": u["dram"], "u_l2": u["l2"], "u_sms": u["sms"],
         "tensor_busy": _weighted(ks, "tensor_busy", w), "vector_busy": _weighted(ks, "vector_busy", w),
         "sfu_busy": _weighted(ks, "sfu_busy", w),
         "l2_hit": (sum(k["l2_hit_bytes"] for k in ks) / sum(k["l2_read_bytes"] for k in ks)
                    if sum(k["l2_read_bytes"] for k in ks) else 0.0),
         "log2_waves": math.log2(max(waves, 1e-3)), "tail": math.ceil(waves) - waves if waves > 1 else 1 - waves,
         "ctas_per_sm": float(main["ctas_per_sm"]),
         "log2_ai_over_ridge": max(-12.0, min(12.0, math.log2(max(ai, 1e-9) / ridge))),
         "log10_cycles": math.log10(max(b["time_us"] * 1e-6 * b["clock_hz"], 1.0)),
         "clock_ratio": sum(c * x for c, x in zip(clocks, w)) / sum(w) / b["clock_hz"],
         "sampled_share": sampled}
    for x in LIMITERS:
        f[f"limiter_{x}"] = float(main.get("occupancy_limiter") == x)
    # the GPU's own balance, so one model serves every GPU it was trained on
    f["log2_ridge"] = math.log2(ridge)
    f["hbm_over_l2"] = b["hbm_bandwidth_bytes_per_s"] / b["l2_bandwidth_bytes_per_s"]
    f.update(structure(params, ks, b["structure"]))
    return f


def structure(params: dict, ks: list, ws: dict) -> dict:
    """The features no GPU resource changes (``ws``: ``workload_structure``); accesses per thread: the
    elements it moves over the elements one aligned access can carry. The compiled counts are
    log2(1 + count), -1 where the compiler's view is the estimate (the trees learn that case from
    the training points simulated with another triton than the one that built their features)."""
    elem = ELEM_BYTES.get(str(params.get("dtype", "fp16")), 2)
    comp = ws.get("compiled")
    sass = {f"log2_sass_{k}": (math.log2(1.0 + comp[k]) if comp else -1.0) for k in COMPILED}
    return {"num_warps": float(params.get("num_warps", 4)), "num_stages": float(params.get("num_stages", 1)),
            "spills": float(any(k.get("spills") for k in ks)), "launches": float(len(ks)),
            "elem_bytes": float(elem),
            "log2_align_bytes": math.log2(ws["align_bytes"]), "log2_elems_per_thread": math.log2(ws["elems_per_thread"]),
            "log2_accesses_per_thread": math.log2(ws["elems_per_thread"] * elem / ws["align_bytes"]),
            "log2_registers": math.log2(max(1, ws["registers"])), "log2_acc_per_thread": math.log2(ws["acc_per_thread"]),
            **sass}


def vector(f: dict, names) -> list:
    return [float(f[n]) for n in names]
