"""A time limit on a launch's simulation, for pruning a tuning search (``gpusim tune``).

Inside ``time_limit(seconds)`` a launch's simulation stops with ``Stopped`` as soon as its clock
passes ``seconds`` while some of its CTAs are still running (``engine.run_processes``), or, at a
CTA's end, as soon as a proven least time of the launch does (``sampling._least_cycles``, with
the tensor pipes' cap ``work_cap`` on what the CTAs still to come can do per cycle). No launch
ends before its clock does, and a point's simulated time is at least each of its launches' times
(a launch the power limit slows runs at a lower clock, which ``under_load.run_launch`` simulates
with the same limit, or keeps its cycles or its time), so a stopped point's simulated time is
more than ``seconds``: the search counts it as pruned with that proven bound instead of
simulating the rest of it. A limit that is never reached changes nothing (the stop is one event
after every other, at a time no CTA reaches).
"""
from __future__ import annotations

import math
from contextlib import contextmanager

_state = {"seconds": None, "reached": None}


class Stopped(Exception):
    """A launch's simulation passed the time limit with CTAs still running."""


@contextmanager
def time_limit(seconds: float | None):
    """Within: stop any launch's simulation once its clock passes ``seconds`` (None or inf: no limit)."""
    prev = _state["seconds"]
    _state["seconds"] = seconds if seconds is not None and math.isfinite(seconds) and seconds > 0 else None
    _state["reached"] = None
    try:
        yield
    finally:
        _state["seconds"] = prev


def stop_cycles(clock_hz: float) -> float | None:
    """The limit in cycles of a launch simulated at ``clock_hz`` (None: no limit)."""
    s = _state["seconds"]
    return None if s is None else s * clock_hz


def stop() -> Stopped:
    """Record that a launch passed the limit; returns the exception to raise."""
    _state["reached"] = _state["seconds"]
    return Stopped(f"the simulated time passed the limit of {_state['seconds'] * 1e6:.1f} us")


def reached() -> float | None:
    """The limit (seconds) that the last simulation inside ``time_limit`` passed, or None."""
    return _state["reached"]


def work_cap(body_tensor_cycles: list, trips_min: int, sm_count: int, ctas_per_sm: int, group: int):
    """(rate, slack, span) such that a launch's progress (loop iterations finished plus CTAs ended,
    ``engine.LaunchSim.progress``) over any ``d`` cycles is at most ``rate * d + slack``, and the
    steady window of a sampled launch (``sampling.py``: the 2 x ``ctas_per_sm`` x ``sm_count``
    CTAs that end after the first wave) lasts at least ``span`` cycles; None when no such cap holds
    (a loop without a dot, a CTA without trips).

    Why: every merged loop step of ``k`` iterations holds its SM's tensor pipe for at least ``k * c``
    cycles (``c``: the least tensor cycles of one iteration of any loop, ``body_tensor_cycles``)
    before its ``k`` units count, and one SM's pipe reservations never overlap, so the steps whose
    reservation starts inside the span add at most ``d / c`` units per SM; each of the at most
    ``ctas_per_sm`` CTAs resident at the span's start adds at most one step begun before it (at most
    ``group`` units). A CTA that ends inside the span and started inside it finished its at least
    ``trips_min`` iterations there; at most ``ctas_per_sm`` others (resident at the start) end.
    The window: some SM ends at least 2 x ``ctas_per_sm`` of its CTAs, at least ``ctas_per_sm`` of
    them started inside it, and their dots hold that SM's pipe for ``trips_min * c`` cycles each."""
    c = min(body_tensor_cycles) if body_tensor_cycles else 0.0
    if c <= 0 or trips_min <= 0 or sm_count <= 0 or ctas_per_sm <= 0:
        return None
    per_end = 1.0 + 1.0 / trips_min
    return sm_count * per_end / c, sm_count * ctas_per_sm * (group * per_end + 1.0), ctas_per_sm * trips_min * c
