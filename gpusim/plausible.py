"""The plausible range of each numeric GPU config field, and the unit hint for a value outside it
(``did you mean 3.35e12 (TB/s)?``). The ranges only catch unit mistakes; ``hardware.physics_problem``
checks the fields together."""
from __future__ import annotations

import math

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30

# Plausible range of each numeric field: (low, high, unit hints). The ranges are wide (about 10x
# beyond every GPU in hardware.md on each side) so that they only catch unit mistakes: a value
# outside its range whose rescaling by a hint's factor lands inside gets "did you mean ...?".
# Hints are (factor, unit the value was probably written in).
_RATE_HINTS = ((1e12, "TB/s"), (1e9, "GB/s"))
PLAUSIBLE = {
    "sm_count": (1, 1024, ()),                                # A100 108, H100/H200 132
    "compute_capability": (10, 200, ((10, "major x 10 + minor"),)),   # 80 (A100), 90 (H100/H200)
    "clock_hz": (1e8, 1e10, ((1e6, "MHz"), (1e9, "GHz"))),    # 1.41 .. 1.98 GHz
    "sram_bytes_per_sm": (4 * KIB, 16 * MIB, ((KIB, "KiB"),)),          # 164 .. 228 KiB
    "sram_bytes_per_cta_max": (4 * KIB, 16 * MIB, ((KIB, "KiB"),)),
    "registers_per_sm": (1024, 1 << 22, ((1024, "K registers"),)),       # 64K
    "max_registers_per_thread": (16, 4096, ()),              # 255
    "max_ctas_per_sm": (1, 1024, ()),                        # 32
    "max_warps_per_sm": (1, 1024, ()),                       # 64
    "l2_bytes": (64 * KIB, 4 * GIB, ((MIB, "MiB"), (KIB, "KiB"))),     # 40 .. 60 MiB
    "l2_line_bytes": (32, 256, ()),                          # 128 (the L2 model: 1 to 8 sectors of 32 B)
    "l2_ways": (1, 1024, ()),                                # 16
    "l2_bandwidth_bytes_per_s": (1e11, 1e15, _RATE_HINTS),   # 7 .. 9 TB/s
    "l2_latency_cycles": (10, 10000, ()),                    # ~263 .. 289
    "l2_write_bandwidth_bytes_per_s": (1e11, 1e15, _RATE_HINTS),   # 4.3 TB/s (H200, measured)
    "sm_load_bytes_per_clk": (1, 4096, ()),                  # 64 .. 102
    "hbm_bytes": (GIB, 1 << 46, ((GIB, "GiB"),)),            # 40 .. 141 GiB
    "hbm_read_bandwidth_bytes_per_s": (1e10, 1e15, _RATE_HINTS),   # 1.5 .. 4.8 TB/s
    "hbm_write_bandwidth_bytes_per_s": (1e10, 1e15, _RATE_HINTS),
    "hbm_copy_bandwidth_bytes_per_s": (1e10, 2e15, _RATE_HINTS),
    "timing_loop_flush_bytes_per_s": (1e10, 1e15, _RATE_HINTS),
    "hbm_latency_cycles": (10, 100000, ()),                  # ~466 .. 667
    "tensor_flops_per_s": (1e12, 1e17, ((1e12, "TFLOP/s"),)),     # 156 .. 989 TFLOP/s
    "fp32_flops_per_s": (1e11, 1e16, ((1e12, "TFLOP/s"),)),       # 19.5 .. 67 TFLOP/s
    "sfu_ops_per_clk_per_sm": (0.5, 4096, ()),               # 16
    "simt_lane_ops_per_clk_per_sm": (0.1, 1e5, ()),          # 25 .. 214 measured
    "cta_dispatch_ns": (0, 1e5, ()),                         # 0.6 measured
    "scalar_access_per_clk_per_sm": (0.05, 1e4, ()),         # 2.0 .. 3.3 measured
    "staged_access_cost": (1.0, 100.0, ()),                  # 1.25 .. 3.3 measured
    "hbm_piece_efficiency": (0.01, 1.0, ()),                 # 0.54 (32-byte pieces) .. 1 measured
    "cp_async_min_bytes": (0, 16, ()),                       # 4 (PTX cp.async cp-size 4, 8, 16)
    "l2_fetch_bytes": (0, 4096, ()),                         # 64 measured (ncu: every other sector hits)
    "request_latency_cycles": (0, 100000, ()),               # 0 .. ~850 measured (256 lines at once)
    "l2_coalesced_fraction": (0.01, 1.0, ()),                # 0.30 .. 0.93 measured (ncu)
    "warp_issue_per_clk_per_sm": (1, 16, ()),               # 4 schedulers per SM
    "hbm_queue_window_cycles": (64, 1e8, ()),                # 8192 (4 us at 1.98 GHz)
    "cta_async_fill_bytes_per_clk": (1, 4096, ()),           # ~56 measured (cp.async into SRAM)
    "warp_load_bytes_per_clk": (0.1, 1024, ()),              # ~3.5 measured (LDG into registers)
    "dependent_latency_cycles": (0, 10000, ()),              # 0 .. 120 fitted (cycles per class)
    "shuffle_lanes_per_clk_per_sm": (1, 4096, ()),           # 32
    "spill_reloads_in_flight_per_warp": (1, 64, ()),         # 3 measured (H100)
    "shared_bytes_per_clk_per_sm": (16, 1 << 16, ()),        # 128
    "power_limit_w": (10, 1e4, ((1e3, "kW"),)),              # 400 (A100 SXM) .. 700 W (H100/H200 SXM)
    "idle_power_w": (0, 5000, ()),                           # ~80 W measured (H200 idle)
    "activity_energy_j": (0, 1e-6, ((1e-12, "pJ"), (1e-9, "nJ"))),   # 3e-11 J/B .. 1e-9 J/cycle measured
    "dvfs_energy_exponent": (0, 6, ()),                      # 2.27 measured (C V^2 f with V ~ f: 2)
    "launch_overhead_us": (0, 1e4, ((1e-3, "ns"),)),         # 1.4 .. 3 us
    "sync_overhead_us": (0, 1e4, ((1e-3, "ns"),)),
    # the links between the GPUs of one node (0 = none, see NONE_VALUE) and NCCL's use of them
    "nvlink_generation": (1, 10, ()),                        # 3 (A100) .. 4 (H100/H200); 5 (B200)
    "nvlink_links": (1, 256, ()),                            # 12 (A100) .. 18 (H100/H200)
    "nvlink_bandwidth_bytes_per_s": (1e10, 1e14, _RATE_HINTS),   # 600 .. 900 GB/s, both directions
    "gpus_per_node": (1, 1024, ()),                          # 8 (HGX); 72 in one NVLink domain (NVL72)
    "nccl_ring_efficiency": (0.05, 1.0, ()),                 # 0.78 .. 0.82 fitted; 1 = the line rate
    "nccl_nvls_efficiency": (0.05, 1.5, ()),                 # 0.60 fitted; past 1: the switch reduces
    "nccl_ll_fraction": (0.01, 1.0, ()),                     # 0.57 fitted (LL moves half its bytes as flags)
    "nccl_call_overhead_us": (0, 1e4, ((1e-3, "ns"),)),      # 27.7 us fitted; 0 in the ideal bound
    "nccl_nvls_latency_us": (0, 1e4, ((1e-3, "ns"),)),       # 14.6 us fitted
    "nccl_ramp_bytes": (KIB, 1 << 40, ((MIB, "MiB"), (KIB, "KiB"))),   # 18.7 MB fitted; 0 = no ramp
    "nccl_ramp_fraction": (0.01, 1.0, ()),                   # 0.59 fitted; 1 = no ramp
}
# Fields whose value here means "the GPU has none of it" (no NVLink, no ramp): that value is
# plausible too; any other has to be inside the range, so 900 (GB/s) still gets its hint.
NONE_VALUE = {"nvlink_generation": 0, "nvlink_links": 0, "nvlink_bandwidth_bytes_per_s": 0, "nccl_ramp_bytes": 0}


def _scaled(v: float, factor: float, unit: str) -> str:
    """``v`` read as written in ``unit`` (``factor`` base units), as a value for the YAML file."""
    exp = math.log10(factor)
    if exp > 0 and abs(exp - round(exp)) < 1e-9 and v * factor >= 1e4:
        return f"{v:g}e{int(round(exp))} ({unit})"
    return f"{v * factor:.15g} ({v:g} {unit})"


def plausibility_problem(name: str, v: float) -> str | None:
    """Why ``v`` is implausible for field ``name`` (with a unit hint when one fits), or None."""
    if name not in PLAUSIBLE or v is None or isinstance(v, bool):
        return None
    if isinstance(v, dict):         # a nested table (request_latency_cycles): its entries
        return next((w for w in map(lambda x: plausibility_problem(name, x), v.values()) if w), None)
    lo, hi, hints = PLAUSIBLE[name]
    if lo <= v <= hi or (name in NONE_VALUE and v == NONE_VALUE[name]):
        return None
    for factor, unit in hints:
        if v > 0 and lo <= v * factor <= hi:
            return f"did you mean {_scaled(v, factor, unit)}?"
    return f"outside the plausible range {lo:g} .. {hi:g}"
