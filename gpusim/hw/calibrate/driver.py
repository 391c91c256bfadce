"""Calibration stages that read the device: what the driver reports, and the running SM clock.

``device_info`` fills the fields the driver knows (SM count, clock, L2 and HBM size, shared
memory, registers) and the provenance; ``effective_clock`` times ``torch.cuda._sleep`` to see the
clock the SMs actually run at. Each stage takes the ``Calibrator`` that collects the numbers.
"""
from __future__ import annotations

import subprocess

from .fit import clock_from_device, provenance
from .log import error_text, log


def nvidia_smi(fields: list) -> dict:
    """``nvidia-smi --query-gpu`` of GPU 0 as {field: text}, or {"error": ...}."""

    try:
        r = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits", "-i", "0"],
                           capture_output=True, text=True, timeout=20)
        vals = [v.strip() for v in r.stdout.strip().splitlines()[0].split(",")]
        return dict(zip(fields, vals)) if len(vals) == len(fields) else {"error": r.stdout.strip()[:200]}
    except Exception as e:
        return {"error": error_text(e)}


def device_info(cal) -> None:
    """The fields the driver reports (torch, Triton, nvidia-smi) and the provenance."""
    torch = cal.torch
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
        dev["triton_error"] = error_text(e)
    smi = nvidia_smi(["name", "driver_version", "clocks.max.sm", "clocks.sm", "clocks.max.mem",
                      "power.limit", "pstate"])
    dev["nvidia_smi"] = smi
    cal.raw["device"] = dev

    clock, how = clock_from_device(dev)
    if clock:
        cal.clock_hz = clock
        cal.field("clock_hz", [clock], f"driver reports the max SM clock ({how})", "Hz")
    else:
        cal.raw["errors"]["clock_hz"] = "no clock reported; base value kept"
    cal.field("sm_count", [cal.sm_count], "driver reports (torch multi_processor_count)")
    if dev.get("L2_cache_size"):
        cal.field("l2_bytes", [dev["L2_cache_size"]], "driver reports (torch L2_cache_size)", "B")
    cal.field("hbm_bytes", [dev["total_memory"]], "driver reports (torch total_memory)", "B")
    if dev.get("shared_memory_per_multiprocessor"):
        cal.field("sram_bytes_per_sm", [dev["shared_memory_per_multiprocessor"]],
                  "driver reports (torch shared_memory_per_multiprocessor)", "B")
    optin = dev.get("shared_memory_per_block_optin") or dev.get("triton", {}).get("max_shared_mem")
    if optin:
        cal.field("sram_bytes_per_cta_max", [optin], "driver reports (max opt-in shared memory per block)", "B")
    if dev.get("regs_per_multiprocessor"):
        cal.field("registers_per_sm", [dev["regs_per_multiprocessor"]],
                  "driver reports (torch regs_per_multiprocessor)")
    if dev.get("max_threads_per_multi_processor"):
        cal.field("max_warps_per_sm", [dev["max_threads_per_multi_processor"] // 32],
                  "driver reports (torch max_threads_per_multi_processor / 32)")
    cal.raw["provenance"] = provenance(dev)


def effective_clock(cal, label: str):
    """SM clock while spinning: torch.cuda._sleep(cycles) timed with CUDA events."""
    torch = cal.torch
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
    r = cal.measurement(f"effective_sm_clock_hz[{label}]", out,
                        "torch.cuda._sleep(2e7 cycles) / CUDA event time (clock64 counts SM cycles)")
    log(f"effective SM clock ({label}): {r['value'] / 1e9:.3f} GHz (clock_hz {cal.clock_hz / 1e9:.3f} GHz)")
