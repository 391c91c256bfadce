"""``gpusim calibrate``: microbenchmarks on a real GPU -> a measured GPU config YAML and raw JSON.

This module owns the calibration microbenchmarks (small hand-written Triton kernels, never the
built-in attention/matmul/elementwise kernels) and the mapping from their numbers to
``GPUConfig`` fields:

=================================  ===========================================================
field                              benchmark
=================================  ===========================================================
hbm_read/write_bandwidth           streaming read / write kernels over GiB-sized buffers
l2_bandwidth_bytes_per_s           one launch sweeping a W-byte buffer P times, plateau W<=16 MiB
sm_load_bytes_per_clk              the same L2-resident sweep with 4-8 CTAs (one per SM)
l2/hbm_latency_cycles              one-warp pointer chasing over a random cycle (.cg loads)
tensor_flops_per_s, tile eff.      each CTA repeats ``acc = tl.dot(a, b, acc)`` on one tile
fp32_flops_per_s                   long chains of x = x * a + b (2 FLOPs per FMA)
sfu_ops_per_clk_per_sm             long chains of x = exp2(x) * c
simt_lane_ops_per_clk_per_sm       ``gpusim.calibrate_ops`` (DSL op loops through the Triton backend)
launch/sync_overhead_us            do_bench of 1 and of 10 launches of a 1-element kernel
sm_count, clock_hz, l2_bytes, ...  what the driver reports (torch / Triton / nvidia-smi)
=================================  ===========================================================

Everything is timed with ``triton.testing.do_bench`` (median; it clears the L2 before every
repetition) and each number is the median of several do_bench calls, reported with its spread.
Every benchmark runs inside try/except: a failure is recorded and the base config's value kept.
The raw numbers are written first (``<out stem>.json``), then the config YAML.

The pure parts (``stats``, ``launch_overheads``, ``l2_falloff``, ``latency_cycles``,
``cyclic_chase``, ``tile_efficiencies``, ``build_config``) run without a GPU. triton and torch
are imported inside functions only.
"""
from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from ..hardware import GPUConfig, Measurement, load_gpu

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
INT_FIELDS = {"sm_count", "sram_bytes_per_sm", "sram_bytes_per_cta_max", "registers_per_sm", "max_registers_per_thread",
              "max_ctas_per_sm", "max_warps_per_sm", "l2_bytes", "l2_line_bytes", "l2_ways", "hbm_bytes"}


# --------------------------------------------------------------------------- plans
@dataclass(frozen=True)
class Plan:
    """Sizes and repetition counts of one calibration run."""

    repeats: int                 # do_bench calls per headline number
    curve_repeats: int           # do_bench calls per curve point / tile shape
    rep_ms: int                  # do_bench rep (ms)
    warmup_ms: int
    hbm_buffer_bytes: int
    l2_sizes_mib: tuple
    l2_sweep_bytes: int          # bytes read per launch of the working-set sweep
    sm_load_configs: tuple       # (num_warps, BLOCK) of the few-CTA sweep
    tile_shapes: tuple           # (m, n, k, num_warps)
    tile_flops_per_cta: float    # FLOPs each CTA does per launch (sets the repeat count R)
    tile_rep_ms: int
    tile_budget_s: float         # stop the tile sweep after this long (shapes are ordered core first)
    hbm_latency_buffers: tuple   # bytes; the first gives hbm_latency_cycles
    l2_chase_nodes: int = 4096   # nodes 256 B apart of the L2-latency chase (hops: 2x and 8x this)
    hbm_chase_hops: tuple = (8192, 40960)
    fma_iters: int = 4096        # loop trips of fma_kernel (8 FMAs each)
    exp2_iters: int = 512
    sm_load_cta_bytes: int = 64 * MIB
    sm_load_buffer_bytes: int = 8 * MIB
    tf32_shapes: tuple = ((128, 128, 32, 8), (64, 64, 32, 4))   # first that runs gives tensor_flops_per_s.fp32


def _core_shapes(extra_k=(32, 64)):
    out = []
    for mn in (16, 32, 64, 128):
        for k in extra_k:
            out.append((mn, mn, k, 4))
            if mn >= 64:
                out.append((mn, mn, k, 8))
    out += [(64, 128, 64, 4), (128, 64, 64, 4), (128, 256, 64, 8), (256, 128, 64, 8)]
    return out


def _full_shapes():
    shapes = _core_shapes()
    for m in (16, 32, 64, 128):
        for n in (16, 32, 64, 128):
            for k in (16, 32, 64, 128):
                for nw in ((4, 8) if m >= 64 and n >= 64 else (4,)):
                    shapes.append((m, n, k, nw))
    return tuple(dict.fromkeys(shapes))


FULL = Plan(repeats=5, curve_repeats=3, rep_ms=100, warmup_ms=25, hbm_buffer_bytes=2 * GIB,
            l2_sizes_mib=(1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 128, 256, 512),
            l2_sweep_bytes=4 * GIB, sm_load_configs=((8, 8192), (16, 16384), (32, 16384)),
            tile_shapes=_full_shapes(), tile_flops_per_cta=4e9, tile_rep_ms=25, tile_budget_s=150.0,
            hbm_latency_buffers=(256 * MIB, 2 * GIB))
QUICK = Plan(repeats=3, curve_repeats=3, rep_ms=40, warmup_ms=10, hbm_buffer_bytes=1 * GIB,
             l2_sizes_mib=(1, 4, 16, 32, 48, 64, 96, 128, 512), l2_sweep_bytes=2 * GIB,
             sm_load_configs=((16, 16384),),
             tile_shapes=tuple(dict.fromkeys(_core_shapes((64,)) + [(128, 128, 32, 8)])),
             tile_flops_per_cta=2e9, tile_rep_ms=20, tile_budget_s=45.0, hbm_latency_buffers=(256 * MIB,))


# --------------------------------------------------------------------------- pure helpers
def stats(samples) -> dict:
    """median / min / max / relative spread ((max - min) / median) of a list of numbers."""
    xs = [float(x) for x in samples if x is not None and math.isfinite(float(x))]
    if not xs:
        return {"value": None, "min": None, "max": None, "spread": None, "n": 0, "samples": []}
    med = float(np.median(xs))
    return {"value": med, "min": min(xs), "max": max(xs), "spread": (max(xs) - min(xs)) / med if med else None,
            "n": len(xs), "samples": xs}


def launch_overheads(t1_us: float, t10_us: float) -> tuple:
    """(launch_overhead_us, sync_overhead_us) from one launch timed alone and ten back to back:
    each extra launch costs (t10 - t1) / 9; what one launch costs beyond that is the sync."""
    launch = max(0.0, (t10_us - t1_us) / 9.0)
    return launch, max(0.0, t1_us - launch)


def latency_cycles(t_short_s: float, t_long_s: float, hops_short: int, hops_long: int, clock_hz: float) -> float:
    """Cycles per dependent load from two pointer-chasing runs (the difference cancels the launch
    and the first cold traversal)."""
    if hops_long <= hops_short:
        raise ValueError("hops_long must exceed hops_short")
    return (t_long_s - t_short_s) / (hops_long - hops_short) * clock_hz


def l2_falloff(curve, plateau_max_bytes: int = 16 * MIB, hbm_bytes_per_s: float | None = None,
               plateau_min_bytes: int = 0) -> dict:
    """Plateau and fall-off of a bandwidth-vs-working-set curve [(W bytes, bytes/s), ...].

    plateau = median bandwidth over plateau_min_bytes < W <= plateau_max_bytes (the calibrator
    skips the smallest sets, which partly hit L1 and the SM's near L2 partition); floor =
    ``hbm_bytes_per_s`` or the bandwidth at the largest W; the fall-off is the first W beyond the
    plateau (log-interpolated from the last point still above it) where bandwidth drops below
    (plateau + floor) / 2. None if it never does."""
    pts = sorted((float(w), float(b)) for w, b in curve if b is not None and math.isfinite(b) and b > 0)
    if not pts:
        return {"plateau": None, "floor": None, "threshold": None, "falloff_bytes": None}
    small = [b for w, b in pts if plateau_min_bytes < w <= plateau_max_bytes] or [pts[0][1]]
    plateau = float(np.median(small))
    floor = float(hbm_bytes_per_s) if hbm_bytes_per_s else pts[-1][1]
    thr = (plateau + floor) / 2.0
    fall = None
    prev = None
    for w, b in pts:
        if w > plateau_max_bytes and b < thr:
            if prev is None or prev[1] <= b or prev[1] < thr:
                fall = w
            else:
                (w0, b0) = prev
                f = (b0 - thr) / (b0 - b)
                fall = 2.0 ** (math.log2(w0) + f * (math.log2(w) - math.log2(w0)))
            break
        prev = (w, b)
    return {"plateau": plateau, "floor": floor, "threshold": thr, "falloff_bytes": fall}


def cyclic_chase(nodes: int, stride: int, seed: int = 0) -> tuple:
    """(positions, next positions) of one random cycle through ``nodes`` slots ``stride`` elements
    apart: starting anywhere, following next visits every node once before returning."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(nodes).astype(np.int64)
    pos = order * stride
    return pos, np.roll(pos, -1)


def tile_efficiencies(tiles: list, peak_flops_per_s: float) -> list:
    """[{m, n, k, num_warps, efficiency}] for the fp16 tiles measured, relative to the peak.

    Every tile ran one CTA per SM, so the per-SM rate ratio equals the whole-GPU ratio."""
    out = []
    for t in tiles:
        f = t.get("flops_per_s")
        if t.get("dtype", "fp16") != "fp16" or not f or not peak_flops_per_s:
            continue
        eff = min(1.5, f / peak_flops_per_s)
        if eff > 0:
            out.append({"m": t["m"], "n": t["n"], "k": t["k"], "num_warps": t["num_warps"],
                        "efficiency": round(eff, 4)})
    return out


def _method_text(r: dict) -> str:
    s = f"measured: {r.get('method', '')}"
    if r.get("n", 0) > 1 and r.get("spread") is not None:
        s += f" (median of {r['n']}, spread {100 * r['spread']:.1f}%: {r['min']:.4g}..{r['max']:.4g})"
    return s


def build_config(base: GPUConfig, raw: dict, name: str) -> tuple:
    """The base config with every measured field of ``raw`` replaced. Returns (config, rejected)
    where rejected maps a field to why its measured value was not used (the base value stays)."""
    data = base.model_dump()
    prov = {str(k): str(v) for k, v in (raw.get("provenance") or {}).items()}
    dev = prov.get("device_name", "GPU")
    data["name"] = name
    data["description"] = (f"{dev} measured by gpusim calibrate{' --quick' if raw.get('quick') else ''} on "
                           f"{prov.get('date', '?')}; fields not measured are from {base.name}")
    sources = {k: f"{base.name}: {v}" for k, v in data.get("sources", {}).items()}
    measurements: list = []
    rejected: dict = {}
    measured_parents: set = set()

    def try_set(key, value, source):
        trial = json.loads(json.dumps(data))
        if "." in key:
            parent, sub = key.split(".", 1)
            trial[parent] = dict(trial[parent])
            trial[parent][sub] = value
        else:
            trial[key] = int(round(value)) if key in INT_FIELDS else value
        try:
            GPUConfig.model_validate(trial)
        except Exception as e:  # pydantic.ValidationError: keep the base value
            errs = getattr(e, "errors", lambda: [])()
            rejected[key] = errs[0]["msg"] if errs else str(e)
            return False
        data.clear()
        data.update(trial)
        parent = key.split(".", 1)[0]
        if "." in key:
            part = f"{key.split('.', 1)[1]}: {source}"
            sources[parent] = f"{sources[parent]}; {part}" if parent in measured_parents else part
            measured_parents.add(parent)
        else:
            sources[parent] = source
        return True

    for key, r in (raw.get("fields") or {}).items():
        v = r.get("value")
        if v is None or not math.isfinite(float(v)):
            rejected[key] = r.get("error", "no value")
            continue
        if key.split(".", 1)[0] not in GPUConfig.model_fields:
            rejected[key] = "not a GPUConfig field"
            continue
        if try_set(key, float(v), _method_text(r)):
            measurements.append(Measurement(field=key, value=float(v), spread=r.get("spread"),
                                            method=r.get("method", "")).model_dump())

    peak = (raw.get("fields") or {}).get("tensor_flops_per_s.fp16", {}).get("value")
    effs = tile_efficiencies(raw.get("tiles") or [], peak) if peak else []
    if effs:
        trial = json.loads(json.dumps(data))
        trial["tensor_tile_efficiency"] = effs
        try:
            GPUConfig.model_validate(trial)
            data["tensor_tile_efficiency"] = effs
            sources["tensor_tile_efficiency"] = (
                f"measured: per-SM dot rate of each tile shape (one CTA per SM, acc = tl.dot(a, b, acc) repeated) "
                f"/ the best fp16 tile's rate; {len(effs)} shapes")
        except Exception as e:  # keep the base list
            rejected["tensor_tile_efficiency"] = str(e).splitlines()[0]

    for t in raw.get("tiles") or []:
        if t.get("flops_per_s"):
            measurements.append(Measurement(
                field=f"tile_flops_per_s[{t.get('dtype', 'fp16')} m={t['m']} n={t['n']} k={t['k']} w={t['num_warps']}]",
                value=float(t["flops_per_s"]), spread=t.get("spread"),
                method=f"{t.get('method', 'tile dot loop')}; R={t.get('repeats')}").model_dump())
    for m in raw.get("measurements") or []:
        if m.get("value") is not None and math.isfinite(float(m["value"])):
            measurements.append(Measurement(field=m["field"], value=float(m["value"]), spread=m.get("spread"),
                                            method=m.get("method", "")).model_dump())
    data["sources"] = sources
    data["measurements"] = measurements
    data["provenance"] = prov
    return GPUConfig.model_validate(data), rejected


def write_config(cfg: GPUConfig, path: Path, header: str = "") -> None:
    text = yaml.safe_dump(cfg.model_dump(), sort_keys=False, width=120, allow_unicode=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(f"# {line}\n" for line in header.splitlines()) + text)
    os.replace(tmp, path)


# --------------------------------------------------------------------------- kernels
_KERNELS: dict = {}


def kernels() -> dict:
    """The calibration kernels, defined on first use (``triton.jit`` reads TRITON_INTERPRET then)."""
    if _KERNELS:
        return _KERNELS
    import triton
    import triton.language as tl

    @triton.jit
    def read_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        x = tl.load(x_ptr + pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK))
        tl.store(out_ptr + pid, tl.sum(x, axis=0))

    @triton.jit
    def write_kernel(y_ptr, value, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        tl.store(y_ptr + pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK), tl.zeros([BLOCK], tl.float32) + value)

    @triton.jit
    def copy_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs))

    @triton.jit
    def sweep_kernel(x_ptr, out_ptr, nchunks, total, BLOCK: tl.constexpr):
        # program p reads chunks p, p + P, p + 2P, ... (mod nchunks): the whole buffer, over and over
        pid = tl.program_id(0)
        nprog = tl.num_programs(0)
        acc = tl.zeros([BLOCK], tl.float32)
        for i in range(pid, total, nprog):
            c = i % nchunks
            acc += tl.load(x_ptr + c * BLOCK + tl.arange(0, BLOCK))
        tl.store(out_ptr + pid, tl.sum(acc, axis=0))

    @triton.jit(do_not_specialize=["start"])
    def chase_kernel(p_ptr, out_ptr, hops, start):
        i = start
        for _ in range(hops):
            i = tl.load(p_ptr + i, cache_modifier=".cg")
        tl.store(out_ptr, i)

    @triton.jit
    def mma_kernel(a_ptr, b_ptr, c_ptr, R, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   TF32: tl.constexpr):
        pid = tl.program_id(0)
        rm = tl.arange(0, BM)
        rn = tl.arange(0, BN)
        rk = tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
        b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
        acc = tl.zeros((BM, BN), tl.float32)
        for _ in range(R):
            if TF32:
                acc = tl.dot(a, b, acc, input_precision="tf32")
            else:
                acc = tl.dot(a, b, acc)
        tl.store(c_ptr + pid * BM * BN + rm[:, None] * BN + rn[None, :], acc)

    @triton.jit
    def fma_kernel(out_ptr, a, b, iters, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        x = offs.to(tl.float32) * 1e-3 + pid
        for _ in range(iters):
            x = x * a + b
            x = x * a + b
            x = x * a + b
            x = x * a + b
            x = x * a + b
            x = x * a + b
            x = x * a + b
            x = x * a + b
        tl.store(out_ptr + pid * BLOCK + offs, x)

    @triton.jit
    def exp2_kernel(out_ptr, c, iters, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        x = offs.to(tl.float32) * 1e-4
        for _ in range(iters):
            x = tl.exp2(x) * c
            x = tl.exp2(x) * c
            x = tl.exp2(x) * c
            x = tl.exp2(x) * c
            x = tl.exp2(x) * c
            x = tl.exp2(x) * c
            x = tl.exp2(x) * c
            x = tl.exp2(x) * c
        tl.store(out_ptr + pid * BLOCK + offs, x)

    @triton.jit
    def tiny_kernel(x_ptr):
        tl.store(x_ptr, 1.0)

    _KERNELS.update(read=read_kernel, write=write_kernel, copy=copy_kernel, sweep=sweep_kernel,
                    chase=chase_kernel, mma=mma_kernel, fma=fma_kernel, exp2=exp2_kernel, tiny=tiny_kernel)
    return _KERNELS


FMA_PER_ITER = 8       # unrolled steps per loop iteration of fma_kernel / exp2_kernel
READ_BLOCK = 4096      # fp32 elements per program of the streaming kernels (16 KiB)
SWEEP_BLOCK = 4096


def launch_read(x, out, num_warps=8, block=READ_BLOCK):
    kernels()["read"][(x.numel() // block,)](x, out, BLOCK=block, num_warps=num_warps)


def launch_write(y, value=1.0, num_warps=8, block=READ_BLOCK):
    kernels()["write"][(y.numel() // block,)](y, value, BLOCK=block, num_warps=num_warps)


def launch_copy(x, y, num_warps=8, block=READ_BLOCK):
    kernels()["copy"][(x.numel() // block,)](x, y, BLOCK=block, num_warps=num_warps)


def launch_sweep(x, out, working_elems, total_iters, grid, num_warps=8, block=SWEEP_BLOCK):
    kernels()["sweep"][(grid,)](x, out, working_elems // block, total_iters, BLOCK=block, num_warps=num_warps)


def launch_chase(buf, out, hops, start):
    kernels()["chase"][(1,)](buf, out, hops, start, num_warps=1)


def launch_mma(a, b, c, R, m, n, k, grid, num_warps, tf32=False):
    kernels()["mma"][(grid,)](a, b, c, R, BM=m, BN=n, BK=k, TF32=tf32, num_warps=num_warps)


def launch_fma(out, iters, grid, a=0.999, b=0.001, num_warps=8, block=2048):
    kernels()["fma"][(grid,)](out, a, b, iters, BLOCK=block, num_warps=num_warps)


def launch_exp2(out, iters, grid, c=0.25, num_warps=8, block=2048):
    kernels()["exp2"][(grid,)](out, c, iters, BLOCK=block, num_warps=num_warps)


def launch_tiny(x):
    kernels()["tiny"][(1,)](x, num_warps=1)


# --------------------------------------------------------------------------- measuring
def _log(msg: str) -> None:
    print(f"[calibrate {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _err(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}".splitlines()[0][:300]


class Calibrator:
    """Runs the microbenchmarks on ``cuda:0`` and collects results into ``self.raw``."""

    def __init__(self, plan: Plan, base: GPUConfig, deadline: float | None = None, quick: bool = False,
                 device: str = "cuda"):
        import torch

        self.torch = torch
        self.plan, self.base, self.deadline = plan, base, deadline
        self.on_gpu = device != "cpu"     # "cpu": the Triton interpreter (tests), with an injected timer
        self.dev = torch.device(device)
        self.sm_count = int(torch.cuda.get_device_properties(0).multi_processor_count) if self.on_gpu else base.sm_count
        self.clock_hz = base.clock_hz
        self.raw = {"quick": quick, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "base": base.name,
                    "provenance": {}, "device": {}, "fields": {}, "measurements": [], "tiles": [], "errors": {},
                    "stage_seconds": {}}

    # ---- small utilities
    def bench_ms(self, fn, n: int, rep_ms: int | None = None, warmup_ms: int | None = None) -> list:
        from triton.testing import do_bench

        rep = rep_ms or self.plan.rep_ms
        warm = warmup_ms or self.plan.warmup_ms
        out = []
        for _ in range(n):
            try:
                out.append(float(do_bench(fn, warmup=warm, rep=rep, return_mode="median")))
            except TypeError:
                out.append(float(do_bench(fn, warmup=warm, rep=rep, quantiles=[0.5])))
        return out

    def field(self, name: str, samples, method: str, unit: str = "") -> dict:
        r = stats(samples)
        r.update(method=method, unit=unit)
        self.raw["fields"][name] = r
        return r

    def measurement(self, name: str, samples, method: str) -> dict:
        r = stats(samples)
        self.raw["measurements"].append({"field": name, "value": r["value"], "spread": r["spread"], "method": method,
                                         "samples": r["samples"]})
        return r

    def sync(self):
        if self.on_gpu:
            self.torch.cuda.synchronize()

    def past_deadline(self) -> bool:
        return self.deadline is not None and time.time() > self.deadline

    def free(self):
        import gc

        gc.collect()
        if self.on_gpu:
            self.torch.cuda.empty_cache()

    def stage(self, name: str, fn) -> None:
        if self.past_deadline():
            self.raw["errors"][name] = "skipped: deadline (GPUSIM_DEADLINE) passed"
            _log(f"{name}: skipped, deadline passed")
            return
        _log(f"{name} ...")
        t0 = time.time()
        try:
            fn()
        except Exception as e:  # one failing benchmark must not lose the others
            self.raw["errors"][name] = _err(e)
            _log(f"{name}: FAILED {_err(e)}")
        finally:
            self.free()
            self.raw["stage_seconds"][name] = round(time.time() - t0, 2)
            _log(f"{name}: done in {time.time() - t0:.1f}s")

    # ---- device description
    def device_info(self):
        torch = self.torch
        p = torch.cuda.get_device_properties(0)
        dev = {"name": p.name, "multi_processor_count": int(p.multi_processor_count),
               "total_memory": int(p.total_memory), "major": p.major, "minor": p.minor}
        for attr in ("L2_cache_size", "shared_memory_per_multiprocessor", "shared_memory_per_block_optin",
                     "regs_per_multiprocessor", "max_threads_per_multi_processor", "clock_rate", "memory_clock_rate",
                     "memory_bus_width"):
            v = getattr(p, attr, None)
            if v is not None:
                dev[attr] = int(v)
        try:
            import triton

            tp = triton.runtime.driver.active.utils.get_device_properties(torch.cuda.current_device())
            dev["triton"] = {k: (int(v) if isinstance(v, (int, float)) else str(v)) for k, v in dict(tp).items()}
        except Exception as e:
            dev["triton_error"] = _err(e)
        smi = _nvidia_smi(["name", "driver_version", "clocks.max.sm", "clocks.sm", "clocks.max.mem",
                           "power.limit", "pstate"])
        dev["nvidia_smi"] = smi
        self.raw["device"] = dev

        clock, how = None, ""
        if smi.get("clocks.max.sm"):
            try:
                clock, how = float(smi["clocks.max.sm"]) * 1e6, "nvidia-smi clocks.max.sm"
            except ValueError:
                pass
        if clock is None and dev.get("triton", {}).get("sm_clock_rate"):
            clock, how = float(dev["triton"]["sm_clock_rate"]) * 1e3, "Triton device properties sm_clock_rate"
        if clock is None and dev.get("clock_rate"):
            clock, how = float(dev["clock_rate"]) * 1e3, "torch device properties clock_rate"
        if clock:
            self.clock_hz = clock
            self.field("clock_hz", [clock], f"driver reports the max SM clock ({how})", "Hz")
        else:
            self.raw["errors"]["clock_hz"] = "no clock reported; base value kept"
        self.field("sm_count", [self.sm_count], "driver reports (torch multi_processor_count)")
        if dev.get("L2_cache_size"):
            self.field("l2_bytes", [dev["L2_cache_size"]], "driver reports (torch L2_cache_size)", "B")
        self.field("hbm_bytes", [dev["total_memory"]], "driver reports (torch total_memory)", "B")
        if dev.get("shared_memory_per_multiprocessor"):
            self.field("sram_bytes_per_sm", [dev["shared_memory_per_multiprocessor"]],
                       "driver reports (torch shared_memory_per_multiprocessor)", "B")
        optin = dev.get("shared_memory_per_block_optin") or dev.get("triton", {}).get("max_shared_mem")
        if optin:
            self.field("sram_bytes_per_cta_max", [optin], "driver reports (max opt-in shared memory per block)", "B")
        if dev.get("regs_per_multiprocessor"):
            self.field("registers_per_sm", [dev["regs_per_multiprocessor"]],
                       "driver reports (torch regs_per_multiprocessor)")
        if dev.get("max_threads_per_multi_processor"):
            self.field("max_warps_per_sm", [dev["max_threads_per_multi_processor"] // 32],
                       "driver reports (torch max_threads_per_multi_processor / 32)")
        self.raw["provenance"] = provenance(dev)

    def effective_clock(self, label: str):
        """SM clock while spinning: torch.cuda._sleep(cycles) timed with CUDA events."""
        torch = self.torch
        cycles = 20_000_000
        torch.cuda._sleep(1000)
        out = []
        for _ in range(3):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            torch.cuda._sleep(cycles)
            e.record()
            e.synchronize()
            out.append(cycles / (s.elapsed_time(e) * 1e-3))
        r = self.measurement(f"effective_sm_clock_hz[{label}]", out,
                             "torch.cuda._sleep(2e7 cycles) / CUDA event time (clock64 counts SM cycles)")
        _log(f"effective SM clock ({label}): {r['value'] / 1e9:.3f} GHz (clock_hz {self.clock_hz / 1e9:.3f} GHz)")

    # ---- a. HBM
    def hbm(self):
        torch, p = self.torch, self.plan
        n = p.hbm_buffer_bytes // 4 // READ_BLOCK * READ_BLOCK
        x = torch.ones(n, dtype=torch.float32, device=self.dev)
        out = torch.empty(n // READ_BLOCK, dtype=torch.float32, device=self.dev)
        launch_read(x, out)
        self.sync()
        expect = float(READ_BLOCK)
        if not torch.all(out == expect):
            raise RuntimeError("read kernel returned wrong sums")
        nb = n * 4
        ms = self.bench_ms(lambda: launch_read(x, out), p.repeats)
        r = self.field("hbm_read_bandwidth_bytes_per_s", [nb / (t * 1e-3) for t in ms],
                       f"Triton streaming read of a {nb / GIB:.1f} GiB fp32 buffer (16 KiB per program, sum "
                       f"stored), bytes read / do_bench median", "B/s")
        _log(f"HBM read  {r['value'] / 1e12:.3f} TB/s")
        y = torch.empty_like(x)
        ms = self.bench_ms(lambda: launch_write(y), p.repeats)
        r = self.field("hbm_write_bandwidth_bytes_per_s", [nb / (t * 1e-3) for t in ms],
                       f"Triton streaming write of a {nb / GIB:.1f} GiB fp32 buffer, bytes written / do_bench "
                       f"median", "B/s")
        _log(f"HBM write {r['value'] / 1e12:.3f} TB/s")
        launch_copy(x, y)
        self.sync()
        ms = self.bench_ms(lambda: launch_copy(x, y), p.repeats)
        r = self.field("hbm_copy_bandwidth_bytes_per_s", [2 * nb / (t * 1e-3) for t in ms],
                       f"Triton copy of a {nb / GIB:.1f} GiB fp32 buffer, bytes read + written / do_bench median",
                       "B/s")
        _log(f"HBM copy  {r['value'] / 1e12:.3f} TB/s (read + write)")

    # ---- b. L2 working-set curve
    def l2_curve(self):
        torch, p = self.torch, self.plan
        chunk = SWEEP_BLOCK * 4
        big = max(p.l2_sizes_mib) * MIB // 4
        x = torch.ones(big, dtype=torch.float32, device=self.dev)
        grid = self.sm_count * 4
        out = torch.empty(grid, dtype=torch.float32, device=self.dev)
        launch_sweep(x, out, 4 * SWEEP_BLOCK, 4 * grid, grid)
        self.sync()
        if abs(float(out.sum()) - 4 * grid * SWEEP_BLOCK) > 1e-3 * 4 * grid * SWEEP_BLOCK:
            raise RuntimeError("sweep kernel returned wrong sums")
        curve = []
        for w_mib in p.l2_sizes_mib:
            w = w_mib * MIB
            passes = max(1, round(p.l2_sweep_bytes / w))
            iters = (w // chunk) * passes
            nbytes = iters * chunk
            try:
                ms = self.bench_ms(lambda: launch_sweep(x, out, w // 4, iters, grid), p.curve_repeats)
            except Exception as e:
                self.raw["errors"][f"l2_curve[{w_mib}MiB]"] = _err(e)
                continue
            r = self.measurement(f"l2_sweep_bandwidth_bytes_per_s[W={w_mib}MiB]", [nbytes / (t * 1e-3) for t in ms],
                                 f"one launch, {grid} CTAs x 8 warps, each sweeping the {w_mib} MiB buffer "
                                 f"({passes} passes in all), bytes read / do_bench median")
            curve.append((w, r["value"]))
            _log(f"  W={w_mib:4d} MiB  {r['value'] / 1e12:7.3f} TB/s")
        hbm = self.raw["fields"].get("hbm_read_bandwidth_bytes_per_s", {}).get("value")
        # the plateau skips W <= 4 MiB (partly L1 and the near L2 partition: faster than the L2 at
        # large) and stops at 3/4 of the L2 the driver reports
        l2_size = int(self.raw.get("device", {}).get("L2_cache_size") or self.base.l2_bytes)
        lo, hi = 4 * MIB, int(0.75 * l2_size)
        f = l2_falloff(curve, hi, hbm, plateau_min_bytes=lo)
        self.raw["l2_curve"] = {"points": curve, **f}
        mid = [b for w, b in curve if lo < w <= hi] or [b for w, b in curve if w <= hi]   # tiny plans
        if mid:
            self.field("l2_bandwidth_bytes_per_s", mid,
                       f"plateau of the working-set sweep: median over 4 MiB < W <= 3/4 of L2 "
                       f"({', '.join(str(w // MIB) for w, _ in curve if lo < w <= hi)} MiB), {grid} CTAs", "B/s")
        if f["falloff_bytes"]:
            self.raw["measurements"].append({
                "field": "l2_falloff_working_set_bytes", "value": f["falloff_bytes"], "spread": None,
                "method": f"working set where the sweep bandwidth drops below (plateau + HBM)/2 = "
                          f"{f['threshold'] / 1e12:.2f} TB/s, log-interpolated; compare l2_bytes "
                          f"{self.raw['device'].get('L2_cache_size', self.base.l2_bytes)}"})
            _log(f"L2 plateau {f['plateau'] / 1e12:.2f} TB/s, falls off at {f['falloff_bytes'] / MIB:.1f} MiB")

    # ---- c. per-SM load bandwidth
    def sm_load(self):
        torch, p = self.torch, self.plan
        w = p.sm_load_buffer_bytes
        x = torch.ones(w // 4, dtype=torch.float32, device=self.dev)
        out = torch.empty(64, dtype=torch.float32, device=self.dev)
        per_cta_bytes = p.sm_load_cta_bytes
        best = None
        for nw, block in p.sm_load_configs:
            for grid in (4, 8):
                chunk = block * 4
                iters = grid * per_cta_bytes // chunk
                try:
                    ms = self.bench_ms(lambda: launch_sweep(x, out, w // 4, iters, grid, num_warps=nw, block=block),
                                       p.curve_repeats)
                except Exception as e:
                    self.raw["errors"][f"sm_load[w{nw} b{block} g{grid}]"] = _err(e)
                    continue
                per_clk = [iters * chunk / grid / (t * 1e-3) / self.clock_hz for t in ms]
                r = self.measurement(f"sm_load_bytes_per_clk[grid={grid} warps={nw} block={block}]", per_clk,
                                     f"{grid} CTAs of {nw} warps sweeping a {w / MIB:g} MiB (L2-resident) buffer, "
                                     f"{block * 4 // KIB} KiB per load step; bytes/s per CTA / clock_hz")
                _log(f"  grid={grid} warps={nw:2d} block={block:5d}: {r['value']:.1f} B/clk per SM")
                if best is None or r["value"] > best[0]["value"]:
                    best = (r, per_clk, nw, block, grid)
        if best is None:
            raise RuntimeError("every few-CTA sweep failed")
        _, samples, nw, block, grid = best
        self.field("sm_load_bytes_per_clk", samples,
                   f"best few-CTA sweep of a {w / MIB:g} MiB L2-resident buffer ({grid} CTAs of {nw} warps, one per SM, "
                   f"{block * 4 // KIB} KiB per step): bytes/s per CTA / clock_hz", "B/clk")

    # ---- d. latency
    def _chase_seconds(self, buf_bytes: int, stride_bytes: int, hops: tuple, seed: int) -> tuple:
        """(seconds per hop for each repeat, number of nodes) of one pointer-chasing setup."""
        torch = self.torch
        n = buf_bytes // 4
        stride = stride_bytes // 4
        nodes = n // stride
        pos, nxt = cyclic_chase(nodes, stride, seed)
        buf = torch.zeros(n, dtype=torch.int32, device=self.dev)
        buf[torch.from_numpy(pos).to(self.dev)] = torch.from_numpy(nxt.astype(np.int32)).to(self.dev)
        out = torch.zeros(1, dtype=torch.int32, device=self.dev)
        start = int(pos[0])
        launch_chase(buf, out, hops[0], start)
        self.sync()
        per_hop = []
        for _ in range(self.plan.curve_repeats):
            t = [self.bench_ms(lambda h=h: launch_chase(buf, out, h, start), 1, rep_ms=60, warmup_ms=1)[0]
                 for h in hops]
            per_hop.append((t[1] - t[0]) * 1e-3 / (hops[1] - hops[0]))
        return per_hop, nodes

    def latency(self):
        nodes_l2 = self.plan.l2_chase_nodes
        per_hop, _ = self._chase_seconds(nodes_l2 * 256, 256, (2 * nodes_l2, 8 * nodes_l2), 1)
        cyc = [s * self.clock_hz for s in per_hop]
        r = self.field("l2_latency_cycles", cyc,
                       f"one warp chasing pointers (ld.global.cg) over a random cycle of {nodes_l2} nodes 256 B apart "
                       f"({nodes_l2 * 256 / MIB:g} MiB, L2-resident): (t(8N hops) - t(2N hops)) / 6N hops x clock_hz",
                       "cycles")
        _log(f"L2 latency {r['value']:.0f} cycles ({r['value'] / self.clock_hz * 1e9:.0f} ns)")
        for i, size in enumerate(self.plan.hbm_latency_buffers):
            stride = 4160
            hops = self.plan.hbm_chase_hops
            per_hop, nodes = self._chase_seconds(size, stride, hops, 2 + i)
            if nodes < hops[1]:
                raise RuntimeError(f"{size} B buffer has only {nodes} nodes")
            cyc = [s * self.clock_hz for s in per_hop]
            method = (f"one warp chasing pointers (ld.global.cg) over a random cycle of {nodes} nodes "
                      f"{stride} B apart in a {size / MIB:.0f} MiB buffer, every hop a new line after do_bench's "
                      f"L2 flush: (t({hops[1]}) - t({hops[0]})) / {hops[1] - hops[0]} hops x clock_hz")
            if i == 0:
                r = self.field("hbm_latency_cycles", cyc, method, "cycles")
            else:
                r = self.measurement(f"hbm_latency_cycles[{size // MIB}MiB buffer, TLB misses likely]", cyc, method)
            _log(f"HBM latency ({size / MIB:.0f} MiB) {r['value']:.0f} cycles "
                 f"({r['value'] / self.clock_hz * 1e9:.0f} ns)")
            self.free()

    # ---- e. tensor cores
    def _mma(self, m, n, k, nw, dtype, flops_per_cta, rep_ms, repeats):
        torch = self.torch
        tdt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
        a = (torch.randn(m, k, device=self.dev) * 0.05).to(tdt)
        b = (torch.randn(k, n, device=self.dev) * 0.05).to(tdt)
        grid = self.sm_count
        c = torch.empty(grid * m * n, dtype=torch.float32, device=self.dev)
        R = int(min(1 << 16, max(64, flops_per_cta / (2.0 * m * n * k))))
        launch_mma(a, b, c, 2, m, n, k, grid, nw, dtype == "fp32")
        self.sync()
        ref = 2.0 * (a.float() @ b.float())
        got = c[: m * n].view(m, n)
        tol = 5e-2 if dtype == "fp32" else 1e-2
        # the Triton interpreter multiplies bf16 dot operands as raw bits: no check there
        if (self.on_gpu or dtype != "bf16") and not torch.allclose(got, ref, rtol=tol, atol=tol * float(ref.abs().max())):
            raise RuntimeError(f"mma kernel result mismatch ({dtype} {m}x{n}x{k})")
        ms = self.bench_ms(lambda: launch_mma(a, b, c, R, m, n, k, grid, nw, dtype == "fp32"), repeats,
                           rep_ms=rep_ms, warmup_ms=5)
        flops = 2.0 * m * n * k * R * grid
        r = stats([flops / (t * 1e-3) for t in ms])
        return {"m": m, "n": n, "k": k, "num_warps": nw, "dtype": dtype, "repeats": R, "flops_per_s": r["value"],
                "spread": r["spread"], "samples": r["samples"],
                "method": f"{grid} CTAs (one per SM), each acc = tl.dot(a, b, acc) R times on one {m}x{k} @ {k}x{n} "
                          f"{dtype} tile, {nw} warps; 2mnkR x CTAs / do_bench median"}

    def tensor(self):
        p = self.plan
        t0 = time.time()
        tiles = self.raw["tiles"]
        skipped = []
        for i, (m, n, k, nw) in enumerate(p.tile_shapes):
            if time.time() - t0 > p.tile_budget_s or self.past_deadline():
                skipped = p.tile_shapes[i:]
                break
            try:
                t = self._mma(m, n, k, nw, "fp16", p.tile_flops_per_cta, p.tile_rep_ms, p.curve_repeats)
                tiles.append(t)
                _log(f"  fp16 {m:3d}x{n:3d}x{k:3d} w{nw}: {t['flops_per_s'] / 1e12:7.1f} TFLOP/s  (R={t['repeats']})")
            except Exception as e:
                tiles.append({"m": m, "n": n, "k": k, "num_warps": nw, "dtype": "fp16", "error": _err(e)})
                _log(f"  fp16 {m:3d}x{n:3d}x{k:3d} w{nw}: failed: {_err(e)}")
        if skipped:
            self.raw["errors"]["tensor_tiles_skipped"] = (f"time budget {p.tile_budget_s:.0f}s: skipped "
                                                          f"{len(skipped)} shapes: {list(skipped)}")
            _log(f"tile sweep budget reached, {len(skipped)} shapes skipped")
        ok = [t for t in tiles if t.get("flops_per_s")]
        if not ok:
            raise RuntimeError("no tile shape ran")
        best = max(ok, key=lambda t: t["flops_per_s"])
        shape = f"{best['m']}x{best['n']}x{best['k']} w{best['num_warps']}"
        self.field("tensor_flops_per_s.fp16", best["samples"],
                   f"best fp16 tile of the sweep ({shape}): {best['method']}", "FLOP/s")
        _log(f"fp16 peak {best['flops_per_s'] / 1e12:.1f} TFLOP/s at {shape}")
        for dtype, shapes in (("bf16", [(best["m"], best["n"], best["k"], best["num_warps"])]),
                              ("fp32", list(p.tf32_shapes))):
            for (m, n, k, nw) in shapes:
                try:
                    t = self._mma(m, n, k, nw, dtype, p.tile_flops_per_cta, self.plan.rep_ms, p.repeats)
                except Exception as e:
                    self.raw["errors"][f"tensor_{dtype}[{m}x{n}x{k} w{nw}]"] = _err(e)
                    continue
                tiles.append(t)
                name = "tf32 (fp32 operands, input_precision=tf32)" if dtype == "fp32" else dtype
                self.field(f"tensor_flops_per_s.{dtype}", t["samples"], f"{name} at {m}x{n}x{k} w{nw}: {t['method']}",
                           "FLOP/s")
                _log(f"{dtype} {m}x{n}x{k} w{nw}: {t['flops_per_s'] / 1e12:.1f} TFLOP/s")
                break

    # ---- f. FP32 and SFU
    def simt(self):
        torch, p = self.torch, self.plan
        grid, block = self.sm_count * 8, 2048
        out = torch.empty(grid * block, dtype=torch.float32, device=self.dev)
        iters = p.fma_iters
        launch_fma(out, 4, grid)
        self.sync()
        ms = self.bench_ms(lambda: launch_fma(out, iters, grid), p.repeats)
        flops = 2.0 * FMA_PER_ITER * iters * block * grid
        r = self.field("fp32_flops_per_s", [flops / (t * 1e-3) for t in ms],
                       f"{grid} CTAs x 8 warps, 8 independent chains per thread of x = x*a + b ({FMA_PER_ITER * iters} "
                       f"steps), 2 FLOPs per FMA / do_bench median", "FLOP/s")
        _log(f"FP32 {r['value'] / 1e12:.1f} TFLOP/s")
        iters = p.exp2_iters
        launch_exp2(out, 4, grid)
        self.sync()
        if not bool(torch.isfinite(out).all()):
            raise RuntimeError("exp2 chain diverged")
        ms = self.bench_ms(lambda: launch_exp2(out, iters, grid), p.repeats)
        ops = float(FMA_PER_ITER * iters * block * grid)
        per_clk = [ops / (t * 1e-3) / (self.sm_count * self.clock_hz) for t in ms]
        r = self.field("sfu_ops_per_clk_per_sm", per_clk,
                       f"{grid} CTAs x 8 warps of x = exp2(x) * c chains ({FMA_PER_ITER * iters} steps, 8 per thread "
                       f"in parallel); exp2 ops/s / (sm_count x clock_hz)", "ops/clk/SM")
        _log(f"exp2 {r['value']:.1f} ops/clk/SM")

    # ---- f'. per-op SIMT rates (gpusim.calibrate_ops: DSL op microbenchmarks through the Triton backend)
    def simt_ops(self):
        try:
            from . import calibrate_ops
        except ImportError as e:
            raise RuntimeError(f"gpusim.calibrate_ops not available: {e}") from None
        rates, times = calibrate_ops.measure(self.sm_count, self.clock_hz, log=_log)
        self.raw["simt_op_times_us"] = times
        how = (f"gpusim.calibrate_ops DSL microbenchmark (one fp32 {calibrate_ops.ROWS}x{calibrate_ops.COLS} tile "
               f"per CTA, {calibrate_ops.CTAS_PER_SM} CTAs per SM, {calibrate_ops.REPS} loop trips), "
               f"time_workload median; lane-ops / (sm_count x clock_hz x seconds)")
        for kind, rate in sorted(rates.items()):
            if kind == "sfu":
                self.measurement("sfu_ops_per_clk_per_sm[calibrate_ops exp2]", [rate], how)
            else:
                self.field(f"simt_lane_ops_per_clk_per_sm.{kind}", [rate], f"{how}, op class {kind}", "ops/clk/SM")
        missing = [k for k in calibrate_ops.OP_KINDS if k not in times]
        if missing:
            self.raw["errors"]["simt_ops_failed"] = f"op kinds that did not run: {missing}"

    # ---- g. launch overhead
    def launch(self):
        """1..4 back-to-back launches of a tiny DSL kernel through the Triton backend (the path the
        validation harness times). With at most 4 launches the host enqueues them all while the GPU
        still runs do_bench's L2-clearing memset, so the line through T(k) is the GPU-side cost."""
        from . import calibrate_ops
        from ..backends import numpy_exec
        from ..backends.triton.run import allocate, launchers

        ks = (1, 2, 3, 4)
        meds = []
        for k in ks:
            w = calibrate_ops.launch_workload(k)
            mem = allocate(w, numpy_exec.random_inputs(w, seed=2), self.dev)
            fns = [f for _, f in launchers(w, mem)]

            def run(fns=fns):
                for f in fns:
                    f()

            run()
            self.sync()
            meds.append(float(np.median(self.bench_ms(run, self.plan.repeats))) * 1e3)
        from .calibrate_ops import launch_costs

        per, fixed = launch_costs(ks, meds)
        self.raw["launch_times_us"] = dict(zip(map(str, ks), meds))
        how = ("do_bench medians T(k) of k = 1..4 back-to-back launches of a 128-element DSL copy kernel "
               "through the Triton backend; per launch = min over k of (T(k) - T(1)) / (k - 1) (a host "
               "that falls behind only adds time), fixed = T(1) - per launch")
        r = self.field("launch_overhead_us", [per], how, "us")
        s_ = self.field("sync_overhead_us", [fixed], how, "us")
        _log(f"launch overhead {r['value']:.2f} us, sync overhead {s_['value']:.2f} us")

    # ---- h. do a CTA's dot and another CTA's SIMT work overlap on one SM?
    def overlap(self):
        from . import calibrate_ops

        res = calibrate_ops.measure_overlap(self.sm_count, log=_log)
        self.raw["overlap_times_us"] = res["times_us"]
        self.field("tensor_simt_overlap", [res["tensor_simt_overlap"]],
                   "gpusim.calibrate_ops.measure_overlap: dot-only, SIMT-only and alternating CTAs at 1-3 per SM",
                   "fraction")

    # ---- i. GPU-wide CTA dispatch rate
    def cta_dispatch(self):
        from . import calibrate_ops

        res = calibrate_ops.measure_cta_dispatch(self.sm_count, log=_log)
        self.raw["cta_dispatch"] = res
        self.field("cta_dispatch_ns", [res[k]["us_per_cta"] * 1e3 for k in res],
                   "gpusim.calibrate_ops.measure_cta_dispatch: slope of time against the number of near-empty "
                   "CTAs (8..64 waves, 1 and 4 warps)", "ns")

    def run_all(self) -> dict:
        if self.on_gpu:
            self.stage("device", self.device_info)
            self.stage("clock_idle", lambda: self.effective_clock("start"))
        self.stage("hbm", self.hbm)
        self.stage("l2_curve", self.l2_curve)
        self.stage("sm_load", self.sm_load)
        self.stage("latency", self.latency)
        self.stage("tensor", self.tensor)
        self.stage("simt", self.simt)
        if self.on_gpu:
            self.stage("simt_ops", self.simt_ops)
        self.stage("launch", self.launch)
        if self.on_gpu:
            self.stage("overlap", self.overlap)
            self.stage("cta_dispatch", self.cta_dispatch)
        if self.on_gpu:
            self.stage("clock_end", lambda: self.effective_clock("after benchmarks"))
        self.raw["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        return self.raw


def _nvidia_smi(fields: list) -> dict:
    try:
        r = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits", "-i", "0"],
                           capture_output=True, text=True, timeout=20)
        vals = [v.strip() for v in r.stdout.strip().splitlines()[0].split(",")]
        return dict(zip(fields, vals)) if len(vals) == len(fields) else {"error": r.stdout.strip()[:200]}
    except Exception as e:
        return {"error": _err(e)}


def provenance(dev: dict) -> dict:
    out = {"device_name": str(dev.get("name", "?")), "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "hostname": socket.gethostname(), "python": sys.version.split()[0]}
    smi = dev.get("nvidia_smi") or {}
    out["driver_version"] = str(smi.get("driver_version", "?"))
    try:
        import torch

        out["torch_version"] = torch.__version__
        out["cuda_version"] = str(torch.version.cuda)
    except Exception:
        pass
    try:
        import triton

        out["triton_version"] = triton.__version__
    except Exception:
        pass
    from .. import __version__

    out["gpusim_version"] = __version__
    return out


# --------------------------------------------------------------------------- output
def format_table(base: GPUConfig, cfg: GPUConfig, raw: dict, rejected: dict) -> str:
    rows = []
    for key, r in (raw.get("fields") or {}).items():
        if "." in key:
            parent, sub = key.split(".", 1)
            b = getattr(base, parent).get(sub)
        else:
            b = getattr(base, key, None)
        used = key not in rejected
        v = r.get("value")
        ratio = f"{float(v) / float(b):.3f}" if v is not None and b else ""
        spread = f"{100 * r['spread']:.1f}%" if r.get("spread") is not None and r.get("n", 0) > 1 else ""
        rows.append((key, f"{float(b):.4g}" if b is not None else "", f"{float(v):.4g}" if v is not None else "FAILED",
                     ratio, spread, "" if used else f"kept base: {rejected[key]}"))
    hdr = ("field", base.name, cfg.name, "ratio", "spread", "note")
    w = [max(len(str(x[i])) for x in rows + [hdr]) for i in range(len(hdr))]
    lines = ["  ".join(str(h).ljust(wi) for h, wi in zip(hdr, w)), "  ".join("-" * wi for wi in w)]
    lines += ["  ".join(str(c).ljust(wi) for c, wi in zip(row, w)) for row in rows]
    lines.append(f"tensor_tile_efficiency: {len(cfg.tensor_tile_efficiency)} shapes")
    f = raw.get("l2_curve") or {}
    if f.get("falloff_bytes"):
        lines.append(f"L2 working-set fall-off: {f['falloff_bytes'] / MIB:.1f} MiB (l2_bytes {cfg.l2_bytes / MIB:.1f} MiB)")
    for k, v in (raw.get("errors") or {}).items():
        lines.append(f"error: {k}: {v}")
    return "\n".join(lines)


def main(args) -> int:
    """Entry point of ``gpusim calibrate`` (args: base, out, quick)."""
    base = load_gpu(args.base)
    out = Path(args.out)
    if out.suffix not in (".yaml", ".yml"):
        out = out.with_suffix(".yaml")
    json_path = out.with_suffix(".json")
    try:
        import torch
    except ImportError as e:
        print(f"gpusim calibrate: torch is needed: {e}", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("gpusim calibrate: no CUDA device visible to torch", file=sys.stderr)
        return 1
    deadline = float(os.environ["GPUSIM_DEADLINE"]) if os.environ.get("GPUSIM_DEADLINE") else None
    plan = QUICK if getattr(args, "quick", False) else FULL
    _log(f"base {base.name}, {'quick' if plan is QUICK else 'full'} plan, output {out} (+ {json_path.name})")
    t0 = time.time()
    cal = Calibrator(plan, base, deadline, quick=plan is QUICK)
    raw = cal.run_all()
    if not raw["provenance"]:
        raw["provenance"] = provenance(raw.get("device") or {"name": torch.cuda.get_device_name(0)})
    raw["total_seconds"] = round(time.time() - t0, 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(raw, indent=1, default=str))
    _log(f"wrote {json_path}")
    cfg, rejected = build_config(base, raw, out.stem)
    raw["rejected"] = rejected
    json_path.write_text(json.dumps(raw, indent=1, default=str))
    write_config(cfg, out, f"Written by `gpusim calibrate` on {raw['provenance'].get('date', '?')} "
                           f"({raw['total_seconds']} s); raw numbers in {json_path.name}.")
    load_gpu(out)
    _log(f"wrote {out} (validates and loads)")
    print(format_table(base, cfg, raw, rejected), flush=True)
    measured = [k for k, r in raw["fields"].items() if r.get("value") is not None and k not in rejected]
    return 0 if measured else 1
