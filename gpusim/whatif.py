"""What-if changes of a GPU config: the fields that follow from a changed field."""
from __future__ import annotations

# What a what-if keeps when it changes one field (``derived_overrides``, applied to --set gpu.X and
# sweep: gpu.X by sweep/gpus.with_overrides):
# - sm_count: each SM's rate. The GPU-wide peaks below are divided among the SMs
#   (tensor_flops_per_clk_per_sm, vector_ops_per_clk_per_sm), and an SM's tensor cores and FP32
#   lanes are its own, so these scale with the SM count.
# - hbm_read / hbm_write bandwidth: the DRAM's bus turnaround, the time a copy takes beyond its
#   reads and writes at their own rates (2/copy - 1/read - 1/write per byte pair). Holding the copy
#   rate instead made a faster read channel lengthen each written byte (2/copy - 1/read), and a
#   kernel slower (elementwise_fused on the h100, reads x4: 10.32 -> 10.69 us).
# - hbm_write bandwidth: the timing loop's L2 flush rate (timing_loop_flush_bytes_per_s). The flush
#   is the measurement's, between repetitions of the kernel; at the what-if's rate a faster write
#   channel shortened it, left the power-limited loop less time to cool and slowed the kernel
#   (backends/sim/power.py, flush_energy).
SM_WIDE_PEAKS = ("tensor_flops_per_s", "fp32_flops_per_s")


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0


def derived_overrides(cfg, overrides: dict) -> dict:
    """``overrides`` plus the fields that follow from them (see above) for the ``GPUConfig`` ``cfg``;
    a field the overrides set themselves is kept as given."""
    out = dict(overrides)
    n = overrides.get("sm_count")
    if _number(n) and n != cfg.sm_count:
        for f in SM_WIDE_PEAKS:
            if f not in out:
                v = getattr(cfg, f)
                out[f] = {k: x * n / cfg.sm_count for k, x in v.items()} if isinstance(v, dict) else v * n / cfg.sm_count
    rd, wr = (overrides.get(f"hbm_{d}_bandwidth_bytes_per_s") for d in ("read", "write"))
    if _number(wr) and "timing_loop_flush_bytes_per_s" not in out:
        out["timing_loop_flush_bytes_per_s"] = cfg.timing_loop_flush_bytes_per_s or cfg.hbm_write_bandwidth_bytes_per_s
    if (cfg.hbm_copy_bandwidth_bytes_per_s and "hbm_copy_bandwidth_bytes_per_s" not in out
            and (_number(rd) or _number(wr))):
        R, W = cfg.hbm_read_bandwidth_bytes_per_s, cfg.hbm_write_bandwidth_bytes_per_s
        turnaround = max(0.0, 2.0 / cfg.hbm_copy_bandwidth_bytes_per_s - 1.0 / R - 1.0 / W)
        R, W = (rd if _number(rd) else R), (wr if _number(wr) else W)
        out["hbm_copy_bandwidth_bytes_per_s"] = 2.0 / (1.0 / R + 1.0 / W + turnaround)
    return out
