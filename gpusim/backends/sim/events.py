"""Timeline events: what the timing model records when asked for a timeline (CTAs on SMs, tile ops,
shared-channel transfers) and what the API adds (launches). ``gpusim.result`` re-exports them."""
from __future__ import annotations

from dataclasses import dataclass

# Times are SM clock cycles from the start of the point (the first launch's issue); ``launch`` names
# the launch an event belongs to. The timing model records them with times from its own launch's
# start and ``launch`` empty; ``shifted`` places them on the point's clock.
@dataclass(frozen=True, slots=True)
class LaunchEvent:
    """A launch: issued at ``t_issue``, its CTAs run from ``t_start`` to ``t_end``."""

    launch: str
    t_issue: float
    t_start: float
    t_end: float


@dataclass(frozen=True, slots=True)
class CTAEvent:
    """One CTA's lifetime on an SM, in CTA slot ``slot`` of the launch."""

    sm: int
    slot: int
    cta: int
    t0: float
    t1: float
    launch: str = ""

    def shifted(self, dt: float, launch: str) -> "CTAEvent":
        return CTAEvent(self.sm, self.slot, self.cta, self.t0 + dt, self.t1 + dt, launch)


OP_KINDS = ("tensor", "simt", "wait")


@dataclass(frozen=True, slots=True)
class OpEvent:
    """A tile op of a CTA: ``kind`` is tensor (a dot), simt (elementwise / reductions) or wait (on a load)."""

    kind: str
    sm: int
    cta: int
    t0: float
    t1: float
    launch: str = ""

    def shifted(self, dt: float, launch: str) -> "OpEvent":
        return OpEvent(self.kind, self.sm, self.cta, self.t0 + dt, self.t1 + dt, launch)


@dataclass(frozen=True, slots=True)
class TransferEvent:
    """``nbytes`` crossing a shared channel (``channel`` is hbm or l2) from ``t0`` to ``t1``."""

    channel: str
    t0: float
    t1: float
    nbytes: float
    launch: str = ""
