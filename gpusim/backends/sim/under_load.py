"""One launch at the SM clock its power allows.

The launch is simulated at the maximum clock (``cfg.clock_hz``). When a timing loop of it would draw
more than the power limit, it runs at the lower clock ``f`` the power model gives (``power.py``),
and its cycles there are found in one of three ways:

- its SMs paced it (``power.sm_paced``): the same cycles;
- its memory paced it and still would (``power.memory_keeps_pace``): the same time;
- otherwise it is simulated again at ``f`` from the same L2 state.

The third way costs a second simulation (half the time of the 4096^3 GEMM of
``benchmarks/bench_speed.py``), and earns it on the GEMMs: over every second recorded flash,
flash backward, GEMM and decode point, 29 have a launch simulated again (19 flash, at 0.97-1.02 of their first
cycles, and 10 GEMMs, at 0.82-1.02). Keeping their cycles instead puts the GEMMs 4-22 points
slower against the H200 and the 28 held-out ones at a median / p90 |error| of 7.2 / 11.1% instead
of 5.7 / 9.5%.

A what-if config that improves on a named GPU (``headroom.named_base``) and whose launch the power
limit slows has the named GPU's operating point among its choices: the launch is simulated on the
named config too, from the same L2 state, and the faster of the two is kept. A named config itself
(every shipped prediction) takes the path above unchanged.
"""
from __future__ import annotations

from . import headroom, power, time_limit
from .engine import LaunchSim


def run_launch(launch, cfg, l2, addr: dict, tensors: dict, fidelity: str, timeline: bool, view=None):
    """(stats, the config it ran on, predicted board watts or None) of one launch. A launch stopped
    by a time limit (``time_limit.Stopped``) hands its L2's arrays on to the next point's cache."""
    try:
        return _run_launch(launch, cfg, l2, addr, tensors, fidelity, timeline, view)
    except time_limit.Stopped:
        l2.release()
        raise


def _run_launch(launch, cfg, l2, addr: dict, tensors: dict, fidelity: str, timeline: bool, view=None):
    state = l2.snapshot() if cfg.power_limit_w and cfg.activity_energy_j else None
    out = _at_power(launch, cfg, l2, state, addr, tensors, fidelity, timeline, view)
    st, lcfg, _ = out
    named = headroom.named_base(cfg) if state is not None and lcfg.clock_hz < cfg.clock_hz else None
    if named is None:
        return out
    # a what-if improving on a named GPU whose power limit binds: the named GPU's operating point
    # is one of its governor's choices (headroom.py), taken when it is the faster one
    mine = l2.snapshot()
    l2.restore(state)
    base = _at_power(launch, named, l2, state, addr, tensors, fidelity, timeline, view)
    if base[0].cycles / base[1].clock_hz < st.cycles / lcfg.clock_hz:
        return base
    l2.restore(mine)
    return out


def _at_power(launch, cfg, l2, state, addr: dict, tensors: dict, fidelity: str, timeline: bool, view=None):
    """(stats, config, watts) of one launch on ``cfg`` at the clock its power allows (the module
    docstring); ``state``: the L2 state before it, to simulate it again from."""
    st = LaunchSim(launch, cfg, l2, addr, tensors, fidelity=fidelity, timeline=timeline, view=view).run()
    if not cfg.activity_energy_j:
        return st, cfg, None
    e_sm, e_mem, seconds = power.launch_energy(cfg, st.counters, st.busy, st.cycles)
    f = power.loaded_clock(cfg, e_sm, e_mem, seconds)
    watts = power.kernel_power(cfg, e_sm, e_mem, seconds, f)
    if f >= cfg.clock_hz:
        return st, cfg, watts
    lcfg = power.at_clock(cfg, f)
    if power.sm_paced(cfg, st):
        return st, lcfg, watts
    if power.memory_keeps_pace(cfg, st, f):
        return power.scaled(st, f / cfg.clock_hz), lcfg, watts
    l2.restore(state)
    return LaunchSim(launch, lcfg, l2, addr, tensors, fidelity=fidelity, timeline=timeline, view=view).run(), lcfg, watts
