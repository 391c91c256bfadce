"""The SM clock under load, as pure functions: a board-power model of one launch.

A GPU runs at its maximum clock (``clock_hz``) until its board power reaches ``power_limit_w``;
past that it lowers the SM clock (and the voltage with it) until the power fits. Measured on the
H200 (``benchmarks/clock_probe.py``, nvidia-smi sampling the clock while a case runs back to back):
FMA and exp2 chains, an HBM stream, an L2 sweep and tiles staged from the L2 into shared memory
stay at 1980 MHz (192-685 W), while a tensor-core tile loop on every SM draws the 700 W limit and
runs at 1680 MHz, and dense GEMMs launched back to back at 1425-1650 MHz.

The launch is simulated at ``clock_hz``; its activity gives its energy there:

    E_mem = e_dram x DRAM bytes + e_l2 x L2 bytes,
    E_sm = e_tensor x tensor FLOPs + e_sram x bytes staged into shared memory
           + (e_vector x vector busy + e_sfu x SFU busy) x SM-cycles

with the energies of ``GPUConfig.activity_energy_j`` (each measured by a microbenchmark that does
mostly that one thing). At a lower clock f the SM part takes f_max / f as long and each SM
operation costs (f / f_max) ** k of its energy (k = ``dvfs_energy_exponent``: energy per
operation follows V**2, V roughly following f); memory energy is fixed. The power limiter acts
over many milliseconds, so the clock is set by the mean power of the timing loop that measures
the kernel (the launch, its launch overhead and do_bench's L2 flush): over the limit, the clock is
the f where that mean meets it. A launch its SMs paced keeps its cycles there (``sm_paced``); one
its memory paced keeps its time when its SM work cannot catch up (``memory_keeps_pace``), and is
otherwise simulated again on ``at_clock(cfg, f)``, from the same L2 state (``under_load.py``;
``at_clock`` keeps the per-clock SM rates and holds bandwidths and memory latencies fixed in time).

Effect (docs/model.md, ablation "clock under load (power)" off): median / p90 |error| +2.9 / +4.2
points on the recorded points, +2.0 / +2.0 on the held-out points.
"""
from __future__ import annotations

MIN_CLOCK_RATIO = 0.4      # never predict below 40% of the maximum clock (the H200's lowest seen: 57%)
# A timing loop (triton.testing.do_bench, as gpusim validate times) clears the L2 before every
# repetition by writing a 256 MiB buffer; the power limiter averages over many repetitions, so a
# short kernel's clock is set by the loop's mean power, flush and launch gaps included.
TIMING_LOOP_FLUSH_BYTES = 256 << 20


def launch_energy(cfg, counters, busy, cycles: float) -> tuple:
    """(SM joules, memory joules, seconds) of a launch that took ``cycles`` at ``cfg.clock_hz``,
    from its counters (tensor FLOPs, DRAM and L2 bytes) and pipe busy fractions (tensor, vector, SFU)."""
    e = cfg.activity_energy_j
    seconds = cycles / cfg.clock_hz
    if not e or cycles <= 0:
        return 0.0, 0.0, seconds
    e_sm = (e.get("tensor_flop", 0.0) * counters.tensor_flops + e.get("sram_byte", 0.0) * counters.sram_bytes
            + (e.get("vector_cycle", 0.0) * busy[1] + e.get("sfu_cycle", 0.0) * busy[2]) * cfg.sm_count * cycles)
    e_mem = (e.get("dram_byte", 0.0) * (counters.dram_read_bytes + counters.dram_write_bytes)
             + e.get("l2_byte", 0.0) * (counters.l2_read_bytes - counters.l2_merged_bytes + counters.l2_write_bytes))
    return e_sm, e_mem, seconds


def _mean_power(cfg, e_sm: float, e_mem: float, seconds: float, f: float, loop: bool) -> float:
    r = f / cfg.clock_hz
    joules, period = e_sm * r ** cfg.dvfs_energy_exponent + e_mem, seconds / r
    if loop:
        flush_j, flush_s = flush_energy(cfg)
        joules += flush_j
        period += flush_s + cfg.launch_overhead_us * 1e-6
    return cfg.idle_power_w + joules / period if period > 0 else cfg.idle_power_w


def flush_energy(cfg) -> tuple:
    """(joules, seconds) of the timing loop's L2 flush: its bytes written at the flush's rate
    (``timing_loop_flush_bytes_per_s``, the named GPU's HBM write rate), or slower where that would
    draw more than the power limit (the flush has no SM work a lower SM clock could save, so its
    memory must slow down to fit).

    The flush belongs to the measurement, not to the kernel: a what-if of the HBM write rate keeps
    the named GPU's flush (``whatif.derived_overrides``). Taken at the what-if's rate, a shorter
    flush left the loop less time to cool and lowered the clock: HBM read and write x1.5 made a
    power-limited 4096^3 GEMM on the h100 slower (204.8 -> 212.4 us, 1625 -> 1555 MHz)."""
    e = cfg.activity_energy_j
    joules = TIMING_LOOP_FLUSH_BYTES * (e.get("dram_byte", 0.0) + e.get("l2_byte", 0.0))
    seconds = TIMING_LOOP_FLUSH_BYTES / (cfg.timing_loop_flush_bytes_per_s or cfg.hbm_write_bandwidth_bytes_per_s)
    headroom = (cfg.power_limit_w or 0.0) - cfg.idle_power_w
    if headroom > 0:
        seconds = max(seconds, joules / headroom)
    return joules, seconds


def loop_power(cfg, e_sm: float, e_mem: float, seconds: float, f: float) -> float:
    """Mean board watts of a timing loop of this launch at SM clock ``f``: each repetition runs the
    launch (its SM time stretched by f_max / f, each SM operation's energy scaled by
    (f / f_max) ** dvfs_energy_exponent), the launch overhead and the L2 flush."""
    return _mean_power(cfg, e_sm, e_mem, seconds, f, loop=True)


def kernel_power(cfg, e_sm: float, e_mem: float, seconds: float, f: float) -> float:
    """Board watts while the launch itself runs at SM clock ``f``."""
    return _mean_power(cfg, e_sm, e_mem, seconds, f, loop=False)


def loaded_clock(cfg, e_sm: float, e_mem: float, seconds: float) -> float:
    """The SM clock at which a timing loop of this launch meets the power limit (``cfg.clock_hz``
    when it fits, or when the config has no power model); found by bisection (the loop's power
    falls with the clock)."""
    limit = cfg.power_limit_w
    if not limit or e_sm <= 0 or loop_power(cfg, e_sm, e_mem, seconds, cfg.clock_hz) <= limit:
        return cfg.clock_hz
    lo, hi = MIN_CLOCK_RATIO * cfg.clock_hz, cfg.clock_hz
    if loop_power(cfg, e_sm, e_mem, seconds, lo) >= limit:
        return lo
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if loop_power(cfg, e_sm, e_mem, seconds, mid) > limit:
            hi = mid
        else:
            lo = mid
    return lo


MEMORY_PACED_SHARE = 0.5   # a memory channel busy this share of the time paces the launch (result.BOUND_BUSY)


def memory_share(cfg, counters, cycles: float) -> float:
    """The busier of a launch's DRAM and L2 channels, as a share of its ``cycles`` at ``cfg.clock_hz``."""
    if cycles <= 0:
        return 0.0
    clk = cfg.clock_hz
    hbm = (counters.dram_read_bytes + counters.dram_write_bytes * cfg.hbm_write_cost) / (cfg.hbm_read_bandwidth_bytes_per_s / clk)
    l2 = (counters.l2_read_bytes - counters.l2_merged_bytes + counters.l2_write_bytes) / (cfg.l2_bandwidth_bytes_per_s / clk)
    return max(hbm, l2) / cycles


def sm_paced(cfg, st) -> bool:
    """Whether a launch simulated at ``cfg.clock_hz`` keeps its cycles at a lower SM clock: no
    memory channel paced it (the busier of DRAM and L2 was under ``MEMORY_PACED_SHARE`` of its
    time, or less busy than its busiest SM pipe). It then waited on SM cycles (pipes, dependent
    chains, issue), and its memory only gains bandwidth per cycle at the lower clock. Simulating
    such a launch again at the lower clock moves the SM-paced points of
    benchmarks/ncu_probe_round6.yaml by -0.9% to +2.0%; a memory-paced one keeps its time
    (``memory_keeps_pace``) or is simulated again (``under_load.py``)."""
    b_mem = memory_share(cfg, st.counters, st.cycles)
    return b_mem < MEMORY_PACED_SHARE or b_mem <= max(st.busy)


def memory_keeps_pace(cfg, st, f: float) -> bool:
    """Whether a memory-paced launch keeps its time at SM clock ``f``: even with its SM pipes'
    work added end to end and stretched by f_max / f, the SMs would be less busy than its busiest
    memory channel. (Otherwise the SM side may catch up, and the launch is simulated again.)
    Against simulating again, over the memory-paced points of benchmarks/ncu_probe_round6.yaml:
    GEMMs within 0.3%, the chained-dot microbenchmark at one CTA per SM 6.4% fast (its own
    dependent chains count in SM cycles too)."""
    return sum(st.busy) * cfg.clock_hz / f <= memory_share(cfg, st.counters, st.cycles)


def scaled(st, rho: float):
    """The stats of a launch whose cycles are ``rho`` times these (the same launch on another SM
    clock: ``rho = f / f_max`` when it keeps its time): its pipes busier per cycle by 1 / rho, its
    events on the new cycles."""
    from dataclasses import replace

    sampling = replace(st.sampling, simulated_cycles=st.sampling.simulated_cycles * rho,
                       extrapolated_cycles=st.sampling.extrapolated_cycles * rho)
    return replace(st.log_scaled(rho), cycles=st.cycles * rho, busy=tuple(b / rho for b in st.busy), sampling=sampling)


def at_clock(cfg, f: float):
    """``cfg`` with its SM clock at ``f``: per-clock SM rates unchanged (the per-second compute
    rates scale with f), bandwidths and the memory latencies unchanged in time (their cycles scale
    with f), and no further power limiting."""
    r = f / cfg.clock_hz
    return cfg.model_copy(update={
        "clock_hz": f,
        "tensor_flops_per_s": {k: v * r for k, v in cfg.tensor_flops_per_s.items()},
        "fp32_flops_per_s": cfg.fp32_flops_per_s * r,
        "l2_latency_cycles": cfg.l2_latency_cycles * r,
        "hbm_latency_cycles": cfg.hbm_latency_cycles * r,
        "power_limit_w": None})
