"""The named GPU a what-if config improves on, for the power limit's best operating point.

A what-if that makes resources of a named GPU faster, bigger or more plentiful (``--set gpu.X``,
``sweep: gpu.*``) describes a GPU that can do everything the named one does: it may leave the
faster resource partly idle and run the named GPU's schedule at the named GPU's clock. Where the
power limit binds, the governor of such a GPU has that operating point among its choices, so its
launch takes no longer than the named GPU's (``under_load.run_launch``): the improvement shows as
headroom the power limit leaves unused, not as a loss.

Without this, a power-limited launch's time followed the noise of its cycles at the maximum clock:
flash B4 H16 N4096 d128 on the h100 with HBM read and write x1.5 took 2.032M -> 2.076M cycles at
1980 MHz (the same energy: SM 0.888 J both, memory 0.107 -> 0.108 J), got 1725 -> 1737 MHz and was
1.5% slower (1182.1 -> 1199.6 us).

``improves_on`` accepts a config only when every field either equals the named one's or is better in
the direction of ``MORE`` / ``LESS``; the L2's geometry, the energies and everything else must be
equal (the launch is replayed from the same L2 state, under the same power physics).
"""
from __future__ import annotations

from functools import lru_cache

# more is better: rates, bandwidths, sizes, counts, the power limit (None there: no limit)
MORE = frozenset((
    "sm_count", "clock_hz", "sram_bytes_per_sm", "sram_bytes_per_cta_max", "registers_per_sm",
    "max_registers_per_thread", "max_ctas_per_sm", "max_warps_per_sm", "l2_bandwidth_bytes_per_s",
    "l2_write_bandwidth_bytes_per_s", "sm_load_bytes_per_clk", "hbm_bytes", "hbm_read_bandwidth_bytes_per_s",
    "hbm_write_bandwidth_bytes_per_s", "hbm_copy_bandwidth_bytes_per_s", "tensor_flops_per_s",
    "fp32_flops_per_s", "sfu_ops_per_clk_per_sm", "simt_lane_ops_per_clk_per_sm",
    "scalar_access_per_clk_per_sm", "hbm_piece_efficiency", "warp_issue_per_clk_per_sm",
    "cta_async_fill_bytes_per_clk", "warp_load_bytes_per_clk", "shuffle_lanes_per_clk_per_sm",
    "spill_reloads_in_flight_per_warp",
    "shared_bytes_per_clk_per_sm", "power_limit_w"))
# less is better: latencies and overheads
LESS = frozenset(("l2_latency_cycles", "hbm_latency_cycles", "cta_dispatch_ns", "request_latency_cycles",
                  "dependent_latency_cycles", "launch_overhead_us", "sync_overhead_us"))
# words about the config, not read by the simulation
WORDS = frozenset(("description", "sources", "measurements", "provenance"))


def _better_or_equal(mine, named, more: bool) -> bool:
    if isinstance(named, dict):
        return (isinstance(mine, dict) and mine.keys() == named.keys()
                and all(_better_or_equal(mine[k], v, more) for k, v in named.items()))
    if mine is None or named is None:
        return mine == named
    return mine >= named if more else mine <= named


def _field_ok(cfg, named, field: str) -> bool:
    mine, theirs = getattr(cfg, field), getattr(named, field)
    if field == "power_limit_w" and mine is None:
        return True                             # no limit at all
    if field == "timing_loop_flush_bytes_per_s":  # the measurement's flush: the named GPU's write rate
        return (mine or cfg.hbm_write_bandwidth_bytes_per_s) == (theirs or named.hbm_write_bandwidth_bytes_per_s)
    if field in MORE or field in LESS:
        return _better_or_equal(mine, theirs, field in MORE)
    return field in WORDS or mine == theirs


def improves_on(cfg, named) -> bool:
    """Whether ``cfg`` differs from ``named`` and is at least as good in every field (see above)."""
    fields = type(cfg).model_fields
    return cfg != named and all(_field_ok(cfg, named, f) for f in fields if f != "name") \
        and cfg.name == named.name


@lru_cache(maxsize=16)
def _shipped(name: str):
    from ...hardware import CONFIG_DIR, ConfigError, load_gpu

    path = CONFIG_DIR / f"{name}.yaml"
    if not name.replace("-", "").replace("_", "").isalnum() or not path.is_file():
        return None
    try:
        return load_gpu(path)
    except ConfigError:
        return None


def named_base(cfg):
    """The shipped config of ``cfg``'s name when ``cfg`` is a what-if that improves on it, else None."""
    named = _shipped(cfg.name) if cfg.name else None
    return named if named is not None and improves_on(cfg, named) else None
