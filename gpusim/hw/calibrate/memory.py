"""Calibration stages of the memory system: HBM bandwidth, the L2 working-set curve, per-SM load
bandwidth, and L2 / HBM latency by pointer chasing.

Each stage takes the ``Calibrator`` (its plan, device, timer and result collection) and records
fields and measurements on it; ``fit`` does the arithmetic, ``bench`` holds the kernels.
"""
from __future__ import annotations

import numpy as np

from .bench import READ_BLOCK, SWEEP_BLOCK, launch_chase, launch_copy, launch_read, launch_sweep, launch_write
from .fit import cyclic_chase, l2_falloff
from .log import error_text, log
from .plan import GIB, KIB, MIB


def hbm(cal) -> None:
    """HBM read, write and copy bandwidth from streaming kernels over a GiB-sized buffer."""
    torch, p = cal.torch, cal.plan
    n = p.hbm_buffer_bytes // 4 // READ_BLOCK * READ_BLOCK
    x = torch.ones(n, dtype=torch.float32, device=cal.dev)
    out = torch.empty(n // READ_BLOCK, dtype=torch.float32, device=cal.dev)
    launch_read(x, out)
    cal.sync()
    expect = float(READ_BLOCK)
    if not torch.all(out == expect):
        raise RuntimeError("read kernel returned wrong sums")
    nb = n * 4
    ms = cal.bench_ms(lambda: launch_read(x, out), p.repeats)
    r = cal.field("hbm_read_bandwidth_bytes_per_s", [nb / (t * 1e-3) for t in ms],
                  f"Triton streaming read of a {nb / GIB:.1f} GiB fp32 buffer (16 KiB per program, sum "
                  f"stored), bytes read / do_bench median", "B/s")
    log(f"HBM read  {r['value'] / 1e12:.3f} TB/s")
    y = torch.empty_like(x)
    ms = cal.bench_ms(lambda: launch_write(y), p.repeats)
    r = cal.field("hbm_write_bandwidth_bytes_per_s", [nb / (t * 1e-3) for t in ms],
                  f"Triton streaming write of a {nb / GIB:.1f} GiB fp32 buffer, bytes written / do_bench "
                  f"median", "B/s")
    log(f"HBM write {r['value'] / 1e12:.3f} TB/s")
    launch_copy(x, y)
    cal.sync()
    ms = cal.bench_ms(lambda: launch_copy(x, y), p.repeats)
    r = cal.field("hbm_copy_bandwidth_bytes_per_s", [2 * nb / (t * 1e-3) for t in ms],
                  f"Triton copy of a {nb / GIB:.1f} GiB fp32 buffer, bytes read + written / do_bench median",
                  "B/s")
    log(f"HBM copy  {r['value'] / 1e12:.3f} TB/s (read + write)")


def l2_curve(cal) -> None:
    """Bandwidth against working set (one launch sweeping a W-byte buffer): the L2 plateau and fall-off."""
    torch, p = cal.torch, cal.plan
    chunk = SWEEP_BLOCK * 4
    big = max(p.l2_sizes_mib) * MIB // 4
    x = torch.ones(big, dtype=torch.float32, device=cal.dev)
    grid = cal.sm_count * 4
    out = torch.empty(grid, dtype=torch.float32, device=cal.dev)
    launch_sweep(x, out, 4 * SWEEP_BLOCK, 4 * grid, grid)
    cal.sync()
    if abs(float(out.sum()) - 4 * grid * SWEEP_BLOCK) > 1e-3 * 4 * grid * SWEEP_BLOCK:
        raise RuntimeError("sweep kernel returned wrong sums")
    curve = []
    for w_mib in p.l2_sizes_mib:
        w = w_mib * MIB
        passes = max(1, round(p.l2_sweep_bytes / w))
        iters = (w // chunk) * passes
        nbytes = iters * chunk
        try:
            ms = cal.bench_ms(lambda: launch_sweep(x, out, w // 4, iters, grid), p.curve_repeats)
        except Exception as e:
            cal.raw["errors"][f"l2_curve[{w_mib}MiB]"] = error_text(e)
            continue
        r = cal.measurement(f"l2_sweep_bandwidth_bytes_per_s[W={w_mib}MiB]", [nbytes / (t * 1e-3) for t in ms],
                            f"one launch, {grid} CTAs x 8 warps, each sweeping the {w_mib} MiB buffer "
                            f"({passes} passes in all), bytes read / do_bench median")
        curve.append((w, r["value"]))
        log(f"  W={w_mib:4d} MiB  {r['value'] / 1e12:7.3f} TB/s")
    hbm = cal.raw["fields"].get("hbm_read_bandwidth_bytes_per_s", {}).get("value")
    # the plateau skips W <= 4 MiB (partly L1 and the near L2 partition: faster than the L2 at
    # large) and stops at 3/4 of the L2 the driver reports
    l2_size = int(cal.raw.get("device", {}).get("L2_cache_size") or cal.base.l2_bytes)
    lo, hi = 4 * MIB, int(0.75 * l2_size)
    f = l2_falloff(curve, hi, hbm, plateau_min_bytes=lo)
    cal.raw["l2_curve"] = {"points": curve, **f}
    mid = [b for w, b in curve if lo < w <= hi] or [b for w, b in curve if w <= hi]   # tiny plans
    if mid:
        cal.field("l2_bandwidth_bytes_per_s", mid,
                  f"plateau of the working-set sweep: median over 4 MiB < W <= 3/4 of L2 "
                  f"({', '.join(str(w // MIB) for w, _ in curve if lo < w <= hi)} MiB), {grid} CTAs", "B/s")
    if f["falloff_bytes"]:
        cal.raw["measurements"].append({
            "field": "l2_falloff_working_set_bytes", "value": f["falloff_bytes"], "spread": None,
            "method": f"working set where the sweep bandwidth drops below (plateau + HBM)/2 = "
                      f"{f['threshold'] / 1e12:.2f} TB/s, log-interpolated; compare l2_bytes "
                      f"{cal.raw['device'].get('L2_cache_size', cal.base.l2_bytes)}"})
        log(f"L2 plateau {f['plateau'] / 1e12:.2f} TB/s, falls off at {f['falloff_bytes'] / MIB:.1f} MiB")


def sm_load(cal) -> None:
    """Per-SM load bandwidth: a few CTAs (one per SM) sweeping an L2-resident buffer."""
    torch, p = cal.torch, cal.plan
    w = p.sm_load_buffer_bytes
    x = torch.ones(w // 4, dtype=torch.float32, device=cal.dev)
    out = torch.empty(64, dtype=torch.float32, device=cal.dev)
    per_cta_bytes = p.sm_load_cta_bytes
    best = None
    for nw, block in p.sm_load_configs:
        for grid in (4, 8):
            chunk = block * 4
            iters = grid * per_cta_bytes // chunk
            try:
                ms = cal.bench_ms(lambda: launch_sweep(x, out, w // 4, iters, grid, num_warps=nw, block=block),
                                  p.curve_repeats)
            except Exception as e:
                cal.raw["errors"][f"sm_load[w{nw} b{block} g{grid}]"] = error_text(e)
                continue
            per_clk = [iters * chunk / grid / (t * 1e-3) / cal.clock_hz for t in ms]
            r = cal.measurement(f"sm_load_bytes_per_clk[grid={grid} warps={nw} block={block}]", per_clk,
                                f"{grid} CTAs of {nw} warps sweeping a {w / MIB:g} MiB (L2-resident) buffer, "
                                f"{block * 4 // KIB} KiB per load step; bytes/s per CTA / clock_hz")
            log(f"  grid={grid} warps={nw:2d} block={block:5d}: {r['value']:.1f} B/clk per SM")
            if best is None or r["value"] > best[0]["value"]:
                best = (r, per_clk, nw, block, grid)
    if best is None:
        raise RuntimeError("every few-CTA sweep failed")
    _, samples, nw, block, grid = best
    cal.field("sm_load_bytes_per_clk", samples,
              f"best few-CTA sweep of a {w / MIB:g} MiB L2-resident buffer ({grid} CTAs of {nw} warps, one per SM, "
              f"{block * 4 // KIB} KiB per step): bytes/s per CTA / clock_hz", "B/clk")


def _chase_seconds(cal, buf_bytes: int, stride_bytes: int, hops: tuple, seed: int) -> tuple:
    """(seconds per hop for each repeat, number of nodes) of one pointer-chasing setup."""
    torch = cal.torch
    n = buf_bytes // 4
    stride = stride_bytes // 4
    nodes = n // stride
    pos, nxt = cyclic_chase(nodes, stride, seed)
    buf = torch.zeros(n, dtype=torch.int32, device=cal.dev)
    buf[torch.from_numpy(pos).to(cal.dev)] = torch.from_numpy(nxt.astype(np.int32)).to(cal.dev)
    out = torch.zeros(1, dtype=torch.int32, device=cal.dev)
    start = int(pos[0])
    launch_chase(buf, out, hops[0], start)
    cal.sync()
    per_hop = []
    for _ in range(cal.plan.curve_repeats):
        t = [cal.bench_ms(lambda h=h: launch_chase(buf, out, h, start), 1, rep_ms=60, warmup_ms=1)[0]
             for h in hops]
        per_hop.append((t[1] - t[0]) * 1e-3 / (hops[1] - hops[0]))
    return per_hop, nodes


def latency(cal) -> None:
    """L2 and HBM latency in cycles: one warp chasing pointers over a random cycle."""
    nodes_l2 = cal.plan.l2_chase_nodes
    per_hop, _ = _chase_seconds(cal, nodes_l2 * 256, 256, (2 * nodes_l2, 8 * nodes_l2), 1)
    cyc = [s * cal.clock_hz for s in per_hop]
    r = cal.field("l2_latency_cycles", cyc,
                  f"one warp chasing pointers (ld.global.cg) over a random cycle of {nodes_l2} nodes 256 B apart "
                  f"({nodes_l2 * 256 / MIB:g} MiB, L2-resident): (t(8N hops) - t(2N hops)) / 6N hops x clock_hz",
                  "cycles")
    log(f"L2 latency {r['value']:.0f} cycles ({r['value'] / cal.clock_hz * 1e9:.0f} ns)")
    for i, size in enumerate(cal.plan.hbm_latency_buffers):
        stride = 4160
        hops = cal.plan.hbm_chase_hops
        per_hop, nodes = _chase_seconds(cal, size, stride, hops, 2 + i)
        if nodes < hops[1]:
            raise RuntimeError(f"{size} B buffer has only {nodes} nodes")
        cyc = [s * cal.clock_hz for s in per_hop]
        method = (f"one warp chasing pointers (ld.global.cg) over a random cycle of {nodes} nodes "
                  f"{stride} B apart in a {size / MIB:.0f} MiB buffer, every hop a new line after do_bench's "
                  f"L2 flush: (t({hops[1]}) - t({hops[0]})) / {hops[1] - hops[0]} hops x clock_hz")
        if i == 0:
            r = cal.field("hbm_latency_cycles", cyc, method, "cycles")
        else:
            r = cal.measurement(f"hbm_latency_cycles[{size // MIB}MiB buffer, TLB misses likely]", cyc, method)
        log(f"HBM latency ({size / MIB:.0f} MiB) {r['value']:.0f} cycles "
            f"({r['value'] / cal.clock_hz * 1e9:.0f} ns)")
        cal.free()
