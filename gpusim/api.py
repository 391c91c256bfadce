"""The Python API: ``simulate(kernel, gpu=..., **params) -> Result``.

Launch overheads: each launch adds ``launch_overhead_us`` and a timed region ``sync_overhead_us``
once (docs/model.md, "Launch overhead"; ablation "launch and sync overheads" off: median / p90
|error| +0.3 / +18.1 points on the recorded points, +2.5 / +11.9 on the held-out points).
"""
from __future__ import annotations

import time
from pathlib import Path

from . import calibration as calib, intervals, physics, precheck
from .backends import numpy_exec
from .backends.sim.cost import InfeasibleError, occupancy
from .compiler import view_of
from .backends.sim.under_load import run_launch
from .backends.sim.l2 import L2Cache
from .backends.sim.stats import LaunchStats
from .dsl import analysis, ir
from .dsl.dtypes import dot_mode
from .hardware import CONFIG_DIR, ConfigError, GPUConfig, load_gpu
from .kernels import Kernel, resolve_kernel
from .result import KernelResult, LaunchEvent, Result, TransferEvent, check_status

AUTO_CHECK_MAX_WORK = 4000        # CTA-iterations the numpy executor runs in a few seconds
AUTO_CHECK_MAX_ELEMS = 1 << 22


_CONFIGS: dict = {}    # (path, its bytes) -> GPUConfig: a YAML parse costs ~0.1-0.3 s per call


def _load_gpu(gpu: str) -> GPUConfig:
    """``load_gpu(gpu)``, parsed once per file content (the simulator never modifies a config)."""
    s = str(gpu)        # resolved as load_gpu resolves it: a path, else configs/NAME.yaml
    p = Path(gpu) if isinstance(gpu, Path) or s.endswith((".yaml", ".yml")) or "/" in s or "\\" in s \
        else CONFIG_DIR / f"{gpu}.yaml"
    try:
        key = (str(p), p.read_bytes())
    except OSError:
        return load_gpu(gpu)            # its own error message
    cfg = _CONFIGS.get(key)
    if cfg is None:
        cfg = _CONFIGS[key] = load_gpu(gpu)
    return cfg


def _addresses(workload: ir.Workload) -> dict:
    """Lay the workload's tensors out in HBM, each aligned to 1 MiB (deterministic)."""
    out, base = {}, 1 << 20
    for name, t in workload.tensors.items():
        out[name] = base
        base += -(-t.nbytes // (1 << 20)) * (1 << 20) + (1 << 20)
    return out


def _check_work(workload: ir.Workload) -> tuple:
    """(CTA-iterations, elements) the numpy executor would have to run and hold."""
    work = sum(analysis.work_bound(launch) for launch in workload.launches)
    elems = sum(t.nbytes // ir.DTYPE_BYTES[t.dtype] for t in workload.tensors.values())
    return work, elems


def simulate_workload(workload: ir.Workload, cfg: GPUConfig, *, fidelity: str = "fast", timeline: bool = False,
                      check="auto", seed: int = 0, max_work: float | None = None, calibration: str = "on") -> Result:
    """Time ``workload`` on ``cfg``; ``sim_wall_s`` is the wall time of the timing simulation (the
    numpy check, when it runs, is not included). ``infeasible`` without simulating when it cannot
    run (HBM capacity, Triton tile rules, per-CTA limits); ``precheck.WorkLimitError`` when the
    estimated work exceeds ``max_work`` (see ``precheck``)."""
    _check_arg(check)
    calib.check_mode(calibration)
    precheck.check_options(check, fidelity, max_work)
    t_wall = time.perf_counter()
    params = dict(workload.params)
    dtype = params.get("dtype", "fp16")
    common = dict(hbm_bandwidth_bytes_per_s=cfg.hbm_read_bandwidth_bytes_per_s, clock_hz=cfg.clock_hz,
                  l2_bandwidth_bytes_per_s=cfg.l2_bandwidth_bytes_per_s, sm_count=cfg.sm_count)
    # the peak of the pipe its dots run on, as the lowering emits them (dtypes.dot_mode: fp32 dots on FMA)
    uses_tensor = any(isinstance(op, ir.Dot) and dot_mode(op.a.dtype, op.b.dtype)[1] == "tensor"
                      for l in workload.launches for op in ir.walk(l.program.body))
    peak = cfg.tensor_flops_per_s.get(dtype, cfg.fp32_flops_per_s) if uses_tensor else cfg.fp32_flops_per_s
    common.update(peak_flops_per_s=peak, ridge_flop_per_byte=peak / cfg.hbm_read_bandwidth_bytes_per_s)
    why = precheck.infeasible_reason(workload, cfg)
    if why:
        return Result(cfg.name, workload.name, params, "infeasible", why, **common)
    try:
        views = [view_of(launch.program, cfg, launch.grid) for launch in workload.launches]
        per_sm = {launch.name: occupancy(launch.program, cfg, launch.grid, view=v).ctas_per_sm
                  for launch, v in zip(workload.launches, views)}
    except InfeasibleError as e:
        return Result(cfg.name, workload.name, params, "infeasible", str(e), **common,
                      sim_wall_s=time.perf_counter() - t_wall)
    precheck.check_work(workload, cfg, fidelity, check, max_work, per_sm)

    l2 = L2Cache(cfg.l2_bytes, cfg.l2_line_bytes, cfg.l2_ways, cfg.l2_fetch_bytes)
    addr = _addresses(workload)
    kernels, events = [], []
    t_cycles = 0.0                      # on cfg's clock (a power-limited launch's cycles are converted)
    launch_cycles = cfg.launch_overhead_us * 1e-6 * cfg.clock_hz
    for launch, view in zip(workload.launches, views):
        st, lcfg, power_w = run_launch(launch, cfg, l2, addr, workload.tensors, fidelity, timeline, view)
        t_start = t_cycles + launch_cycles
        kernels.append(_kernel_result(launch, lcfg, st, launch_cycles * lcfg.clock_hz / cfg.clock_hz,
                                      t_start * lcfg.clock_hz / cfg.clock_hz, power_w))
        ratio = cfg.clock_hz / lcfg.clock_hz
        if timeline:
            events.extend(_timeline(launch.name, st, t_cycles, t_start, ratio))
        t_cycles = t_start + st.cycles * ratio
    l2.release()
    total_us = t_cycles / cfg.clock_hz * 1e6 + cfg.sync_overhead_us
    wall = time.perf_counter() - t_wall

    err = None
    if check is True or (check == "auto" and workload.reference is not None and _auto_ok(workload)):
        err = numpy_exec.check(workload, seed)
    status, reason = check_status(params, err)
    kind, note = intervals.config_kind(cfg)
    r = Result(cfg.name, workload.name, params, status, reason, tuple(kernels), total_us, err,
               timeline=tuple(events), sim_wall_s=wall, config_kind=kind, config_note=note, **common)
    return physics.judge(calib.apply(r, cfg, calibration, workload), workload, cfg)


def _kernel_result(launch: ir.Launch, cfg: GPUConfig, st: LaunchStats, launch_cycles: float,
                   t_start: float, power_w: float | None = None) -> KernelResult:
    c, occ, smp = st.counters, st.occupancy, st.sampling
    return KernelResult(
        launch=launch.name, grid=tuple(launch.grid), ctas_per_sm=occ.ctas_per_sm,
        occupancy_limiter=occ.limiter, waves=launch.num_programs / (cfg.sm_count * occ.ctas_per_sm),
        time_us=(st.cycles + launch_cycles) / cfg.clock_hz * 1e6, cycles=st.cycles,
        dram_read_bytes=c.dram_read_bytes, dram_write_bytes=c.dram_write_bytes, l2_read_bytes=c.l2_read_bytes,
        l2_hit_bytes=c.l2_hit_bytes, sram_read_bytes=c.sram_bytes, tensor_flops=c.tensor_flops,
        vector_flops=c.vector_flops, sfu_ops=c.sfu_ops, tensor_busy=st.busy[0], vector_busy=st.busy[1],
        sfu_busy=st.busy[2], simulated_ctas=smp.simulated_ctas, total_ctas=smp.total_ctas,
        loop_group=smp.loop_group, start_us=t_start / cfg.clock_hz * 1e6, resources=occ.resources, compiler=occ.compiler,
        clock_hz=cfg.clock_hz, power_w=power_w, l2_merged_bytes=c.l2_merged_bytes, spills=occ.spills)


def _timeline(name: str, st: LaunchStats, t_issue: float, t_start: float, ratio: float = 1.0) -> list:
    """A launch's timeline events on the point's clock: the launch, its CTAs and ops, its transfers
    (``ratio``: the point's clock over the launch's, when its power limit lowered it)."""
    out = [LaunchEvent(name, t_issue, t_start, t_start + st.cycles * ratio)]
    st = st.log_scaled(ratio)
    out.extend(e.shifted(t_start, name) for e in st.events)
    for channel, log in st.transfers:
        out.extend(TransferEvent(channel, s + t_start, e + t_start, b, name) for s, e, b in log)
    return out


def _check_arg(check) -> None:
    if not (isinstance(check, bool) or (isinstance(check, str) and check == "auto")):
        raise ValueError(f"check must be True, False or 'auto', got {check!r}")


def _check_gpu_seed(gpu, seed) -> None:
    """One-line typed errors for a ``gpu`` that is no name, path or GPUConfig, and a ``seed`` numpy
    cannot use (numpy's seeds are integers 0..2**32-1)."""
    import os

    if not isinstance(gpu, (str, os.PathLike, GPUConfig)) or (isinstance(gpu, str) and not gpu.strip()):
        raise ConfigError(f"gpu must be a GPU name (see `gpusim gpus`), a path to a GPU YAML or a GPUConfig, "
                          f"got {type(gpu).__name__} {str(gpu)[:40]!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ValueError(f"seed must be an integer from 0 to 2**32-1, got {type(seed).__name__} {str(seed)[:40]!r}")


def _auto_ok(workload) -> bool:
    work, elems = _check_work(workload)
    return work <= AUTO_CHECK_MAX_WORK and elems <= AUTO_CHECK_MAX_ELEMS


def simulate(kernel: str | Kernel, gpu: str | GPUConfig = "h100", *, check="auto", fidelity: str = "fast",
             timeline: bool = False, seed: int = 0, max_work: float | None = None, calibration: str = "on",
             **params) -> Result:
    """Build ``kernel`` (a Kernel, a built-in name, ``file.py:name`` or ``module:name``) with
    ``params`` and time it on ``gpu``. An unknown parameter raises KernelParamError; a point whose
    estimated work exceeds ``max_work`` raises ``precheck.WorkLimitError``.

    >>> r = simulate("attention_flash", gpu="h100", seq_len=1024, batch=1, heads=4)
    >>> r.status, r.time_us > 0
    ('ok', True)
    """
    _check_arg(check)
    _check_gpu_seed(gpu, seed)
    precheck.check_options(check, fidelity, max_work)
    cfg = gpu if isinstance(gpu, GPUConfig) else _load_gpu(gpu)
    k = resolve_kernel(kernel)
    p = k.resolve(params)
    try:
        workload = k.build(p)
    except ValueError as e:
        return Result(cfg.name, k.name, p, "error", str(e))
    return simulate_workload(workload, cfg, fidelity=fidelity, timeline=timeline, check=check, seed=seed,
                             max_work=max_work, calibration=calibration)
