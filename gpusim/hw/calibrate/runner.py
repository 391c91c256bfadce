"""``gpusim calibrate``: run the microbenchmarks on a real GPU, write the raw JSON and a config YAML.

Owns the ``Calibrator`` (the plan, the device, the timer and the collected numbers ``raw``), the
order of the stages (``driver``, ``memory`` and ``compute`` hold them), and the two commands:
``main(args)`` (a measured config from a base config) and ``main_ops(args)`` (``--ops``: the DSL op,
launch, overlap, CTA-dispatch and segment microbenchmarks of ``ops``, written as one JSON).

Every stage runs inside try/except: a failure is recorded in ``raw["errors"]`` and the base config's
value kept. The raw numbers are written first (``<out stem>.json``), then the config YAML.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from ...hardware import GPUConfig, load_gpu
from . import compute, driver, memory, ops
from .fit import build_config, clock_from_device, format_table, provenance, stats, write_config
from .log import error_text, log
from .plan import FULL, QUICK, Plan

OPS_STAGES = ("launch", "overlap", "ctas", "segments", "simt_ops")     # in the order they run
OPS_DEFAULT = ("launch", "overlap", "simt_ops")


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
        self.clock_hz = base.clock_hz     # until the driver reports the GPU's own (driver.device_info)
        self.raw = {"quick": quick, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "base": base.name,
                    "provenance": {}, "device": {}, "fields": {}, "measurements": [], "tiles": [], "errors": {},
                    "stage_seconds": {}}

    def bench_ms(self, fn, n: int, rep_ms: int | None = None, warmup_ms: int | None = None) -> list:
        """``n`` do_bench medians of ``fn`` in milliseconds (do_bench clears the L2 before every repetition)."""
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
        """Record a measured GPUConfig field (``name``, or ``parent.key`` for a dict field)."""
        r = stats(samples)
        r.update(method=method, unit=unit)
        self.raw["fields"][name] = r
        return r

    def measurement(self, name: str, samples, method: str) -> dict:
        """Record a number kept in the config's measurements list, not a field."""
        r = stats(samples)
        self.raw["measurements"].append({"field": name, "value": r["value"], "spread": r["spread"], "method": method,
                                         "samples": r["samples"]})
        return r

    def sync(self) -> None:
        if self.on_gpu:
            self.torch.cuda.synchronize()

    def past_deadline(self) -> bool:
        return self.deadline is not None and time.time() > self.deadline

    def free(self) -> None:
        import gc

        gc.collect()
        if self.on_gpu:
            self.torch.cuda.empty_cache()

    def stage(self, name: str, fn) -> None:
        """Run one stage; a failure (or a passed deadline) is recorded and the run goes on."""
        if self.past_deadline():
            self.raw["errors"][name] = "skipped: deadline (GPUSIM_DEADLINE) passed"
            log(f"{name}: skipped, deadline passed")
            return
        log(f"{name} ...")
        t0 = time.time()
        try:
            fn()
        except Exception as e:  # one failing benchmark must not lose the others
            self.raw["errors"][name] = error_text(e)
            log(f"{name}: FAILED {error_text(e)}")
        finally:
            self.free()
            self.raw["stage_seconds"][name] = round(time.time() - t0, 2)
            log(f"{name}: done in {time.time() - t0:.1f}s")

    def run_all(self) -> dict:
        """Every stage in order (the driver-only and GPU-only ones skipped on the interpreter)."""
        if self.on_gpu:
            self.stage("device", lambda: driver.device_info(self))
            self.stage("clock_idle", lambda: driver.effective_clock(self, "start"))
        self.stage("hbm", lambda: memory.hbm(self))
        self.stage("l2_curve", lambda: memory.l2_curve(self))
        self.stage("sm_load", lambda: memory.sm_load(self))
        self.stage("latency", lambda: memory.latency(self))
        self.stage("tensor", lambda: compute.tensor(self))
        self.stage("simt", lambda: compute.simt(self))
        if self.on_gpu:
            self.stage("simt_ops", lambda: compute.simt_ops(self))
        self.stage("launch", lambda: compute.launch(self))
        if self.on_gpu:
            self.stage("overlap", lambda: compute.overlap(self))
            self.stage("cta_dispatch", lambda: compute.cta_dispatch(self))
            self.stage("clock_end", lambda: driver.effective_clock(self, "after benchmarks"))
        self.raw["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        return self.raw


def _cuda_problem() -> str | None:
    """Why calibration cannot run here (no torch, no CUDA device), or None."""
    try:
        import torch
    except ImportError as e:
        return f"torch is needed: {e}"
    if not torch.cuda.is_available():
        return "no CUDA device visible to torch"
    return None


def _deadline() -> float | None:
    return float(os.environ["GPUSIM_DEADLINE"]) if os.environ.get("GPUSIM_DEADLINE") else None


def main(args) -> int:
    """Entry point of ``gpusim calibrate --out CONFIG.yaml`` (args: base, out, quick)."""
    base = load_gpu(args.base)
    out = Path(args.out)
    if out.suffix not in (".yaml", ".yml"):
        out = out.with_suffix(".yaml")
    json_path = out.with_suffix(".json")
    problem = _cuda_problem()
    if problem:
        print(f"gpusim calibrate: {problem}", file=sys.stderr)
        return 1
    import torch

    plan = QUICK if getattr(args, "quick", False) else FULL
    log(f"base {base.name}, {'quick' if plan is QUICK else 'full'} plan, output {out} (+ {json_path.name})")
    t0 = time.time()
    cal = Calibrator(plan, base, _deadline(), quick=plan is QUICK)
    raw = cal.run_all()
    if not raw["provenance"]:
        raw["provenance"] = provenance(raw.get("device") or {"name": torch.cuda.get_device_name(0)})
    raw["total_seconds"] = round(time.time() - t0, 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(raw, indent=1, default=str))
    log(f"wrote {json_path}")
    cfg, rejected = build_config(base, raw, out.stem)
    raw["rejected"] = rejected
    json_path.write_text(json.dumps(raw, indent=1, default=str))
    write_config(cfg, out, f"Written by `gpusim calibrate` on {raw['provenance'].get('date', '?')} "
                           f"({raw['total_seconds']} s); raw numbers in {json_path.name}.")
    load_gpu(out)
    log(f"wrote {out} (validates and loads)")
    print(format_table(base, cfg, raw, rejected), flush=True)
    measured = [k for k, r in raw["fields"].items() if r.get("value") is not None and k not in rejected]
    return 0 if measured else 1


def sm_clock_hz(base: GPUConfig) -> tuple:
    """(SM clock in Hz, its source): the max clock the driver reports, else ``base.clock_hz``."""
    clock, how = clock_from_device({"nvidia_smi": driver.nvidia_smi(["clocks.max.sm"])})
    return (clock, how) if clock else (base.clock_hz, f"{base.name} config clock_hz")


def run_ops(stages, sm_count: int, clock_hz: float) -> dict:
    """The ``ops`` microbenchmarks named in ``stages``, in the order of OPS_STAGES; a stage that
    fails is recorded as {"error": ...} and the others still run."""
    bodies = {"launch": ops.measure_launch,
              "overlap": lambda: ops.measure_overlap(sm_count),
              "ctas": lambda: ops.measure_cta_dispatch(sm_count),
              "segments": ops.measure_segments,
              "simt_ops": lambda: dict(zip(("rates", "times_us"), ops.measure(sm_count, clock_hz)),
                                       clock_hz=clock_hz)}
    res = {}
    for name in OPS_STAGES:
        if name not in stages:
            continue
        try:
            res[name] = bodies[name]()
        except Exception as e:  # one failing benchmark must not lose the others
            res[name] = {"error": f"{type(e).__name__}: {e}"}
            print(f"{name} failed:", e)
    return res


def main_ops(args) -> int:
    """Entry point of ``gpusim calibrate --ops OUT.json`` (args: ops, ops_stages, base)."""
    stages = tuple(args.ops_stages or OPS_DEFAULT)
    problem = _cuda_problem()
    if problem:
        print(f"gpusim calibrate: {problem}", file=sys.stderr)
        return 1
    import torch

    base = load_gpu(args.base)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    clock, how = sm_clock_hz(base) if "simt_ops" in stages else (None, "")
    if clock:
        log(f"SM clock {clock / 1e9:.3f} GHz ({how})")
    res = run_ops(stages, sms, clock)
    if "simt_ops" in res:
        print(res["simt_ops"])
    out = Path(args.ops)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    log(f"wrote {out}")
    return 1 if any("error" in r for r in res.values() if isinstance(r, dict)) else 0
