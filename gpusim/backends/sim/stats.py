"""What one simulated launch reports: counters and the typed, frozen ``LaunchStats``.

This module owns the boundary between the timing model and its readers: ``gpusim.api`` reads a
launch's outcome only from ``LaunchStats``, never from the engine's internals.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from .cost import Occupancy


@dataclass(frozen=True)
class Counters:
    """Bytes moved and arithmetic done by a launch (or a part of it)."""

    dram_read_bytes: float = 0.0
    dram_write_bytes: float = 0.0
    l2_read_bytes: float = 0.0
    l2_hit_bytes: float = 0.0
    l2_write_bytes: float = 0.0
    l2_merged_bytes: float = 0.0       # read bytes the L2 request coalescer merged (no slice read)
    sram_bytes: float = 0.0
    tensor_flops: float = 0.0
    vector_flops: float = 0.0
    sfu_ops: float = 0.0

    def plus(self, other: "Counters", scale: float = 1.0) -> "Counters":
        """self + scale * other, field by field."""
        return Counters(*(getattr(self, k) + scale * getattr(other, k) for k in COUNTER_FIELDS))


COUNTER_FIELDS = tuple(f.name for f in fields(Counters))


class Tally:
    """The mutable running total the engine adds to on every load, store and step."""

    __slots__ = COUNTER_FIELDS

    def __init__(self):
        for k in COUNTER_FIELDS:
            setattr(self, k, 0.0)

    def freeze(self) -> Counters:
        return Counters(*(getattr(self, k) for k in COUNTER_FIELDS))


@dataclass(frozen=True)
class Sampling:
    """How much of the launch was simulated: CTAs simulated of the total, loop iterations merged
    per step, and the cycles simulated and extrapolated (their sum is the launch's cycles)."""

    simulated_ctas: int
    total_ctas: int
    loop_group: int
    simulated_cycles: float
    extrapolated_cycles: float


@dataclass(frozen=True)
class LaunchStats:
    """The outcome of one simulated launch; times in SM clock cycles from the launch's start.

    ``busy`` is the (tensor, vector, SFU) pipes' busy time as a fraction of the launch's time
    summed over all SMs. ``events`` (CTAEvent / OpEvent) and ``transfers`` (channel name -> its
    ((start, end, bytes), ...) log) are empty unless a timeline was asked for."""

    cycles: float
    counters: Counters
    busy: tuple
    occupancy: Occupancy
    sampling: Sampling
    events: tuple = ()
    transfers: tuple = ()      # ((channel name, log), ...)

    def log_scaled(self, r: float) -> "LaunchStats":
        """These stats with the times of their events and transfers multiplied by ``r`` (the same
        launch counted on another clock)."""
        from dataclasses import replace

        if r == 1.0:
            return self
        return replace(self, events=tuple(replace(e, t0=e.t0 * r, t1=e.t1 * r) for e in self.events),
                       transfers=tuple((ch, tuple((a * r, b * r, n) for a, b, n in log)) for ch, log in self.transfers))
