"""Timeline output for one simulated point: a Chrome trace (timeline.json) and a Gantt chart.

This module owns turning ``Result.timeline`` (the typed events of ``gpusim.result``, in SM clock
cycles, recorded by ``simulate(..., timeline=True)``) into

* ``timeline.json`` in Chrome Trace Event format (open it in https://ui.perfetto.dev or
  chrome://tracing): a "kernels" process with the launches, an "SMs" process with one track per
  SM (one per SM and CTA slot when several CTAs share an SM) holding CTA lifetimes with their tile
  ops nested inside, and a "memory" process with HBM and L2 bandwidth counters in GB/s. Times are
  microseconds; every slice keeps its raw cycles in ``args``;
* ``timeline.png`` (or svg): a Gantt chart of the first SMs over time with the HBM and L2
  bandwidth underneath on the same time axis.

With fast fidelity only a sample of the CTAs is simulated and the rest of each launch is
extrapolated; that stretch has no CTA events and is marked as such in both outputs.

The events are split by kind in ``timeline_data.py``; ``chrome_trace.py`` and ``gantt.py`` draw them.
"""
from __future__ import annotations

import json
from pathlib import Path

from .chrome_trace import trace_events
from .gantt import gantt
from .timeline_data import (COUNTER_BINS, GANTT_MAX_LANES, GANTT_MAX_SMS, MAX_TRACE_EVENTS, OP_COLORS,  # noqa: F401
                            OP_NAMES, Parsed, bandwidth_bins, parse)


# --------------------------------------------------------------------------- entry point
def write_timeline(result, out: Path, fmt: str = "png") -> list:
    """Write DIR/timeline.json (Chrome trace) and DIR/timeline.<fmt> (Gantt) for a Result simulated with
    ``timeline=True``; returns the written paths."""
    if not getattr(result, "timeline", None):
        raise ValueError(f"{result.kernel} on {result.gpu}: the result has no timeline events; "
                         f"simulate it with timeline=True")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    p = parse(result)
    doc = trace_events(p, result)
    jpath = out / "timeline.json"
    jpath.write_text(json.dumps(doc, separators=(",", ":"), default=float))
    return [jpath, gantt(p, result, out, "svg" if fmt == "svg" else "png")]
