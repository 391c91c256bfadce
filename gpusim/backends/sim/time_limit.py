"""A time limit on a launch's simulation, for pruning a tuning search (``gpusim tune``).

Inside ``time_limit(seconds)`` a launch's simulation stops with ``Stopped`` as soon as its clock
passes ``seconds`` while some of its CTAs are still running (``engine.run_processes``). No launch
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
