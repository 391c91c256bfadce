"""timeline.json: a point's timeline in Chrome Trace Event format (open it in https://ui.perfetto.dev
or chrome://tracing). A "kernels" process holds the launches, an "SMs" process one track per SM (one
per SM and CTA slot when several CTAs share an SM) with CTA lifetimes and their tile ops nested
inside, and a "memory" process HBM and L2 bandwidth counters in GB/s. Times are microseconds; every
slice keeps its raw cycles in ``args``."""
from __future__ import annotations

from .timeline_data import (COUNTER_BINS, MAX_TRACE_EVENTS, OP_NAMES, PID_KERNELS, PID_MEMORY, PID_SMS, Parsed,
                            bandwidth_bins)


def _meta(pid, name, value, tid=None, key="name"):
    ev = {"ph": "M", "pid": pid, "name": name, "args": {key: value}}
    if tid is not None:
        ev["tid"] = tid
    return ev


def _thread_name(sm: int, lane: int, lanes: int) -> str:
    return f"SM {sm}" if lanes == 1 else f"SM {sm} slot {lane}"


def _span(p: Parsed, t0, t1):
    """ts/dur in µs rounded to 0.1 ns; rounding both ends keeps nested slices nested."""
    a, b = round(p.us(t0), 4), round(p.us(t1), 4)
    return {"ts": a, "dur": round(b - a, 4)}


def _cyc(x):
    return round(float(x), 2)


def _kept_sms(p: Parsed, max_events: int) -> tuple:
    """(slices per SM, the SMs kept in the trace in order, a note when some were dropped)."""
    per_sm = {}
    for c in p.ctas:
        per_sm[c[0]] = per_sm.get(c[0], 0) + 1
    for o in p.ops:
        per_sm[o[1]] = per_sm.get(o[1], 0) + 1
    keep, total = [], 0
    for sm in sorted(per_sm):
        if total + per_sm[sm] > max_events and keep:
            break
        keep.append(sm)
        total += per_sm[sm]
    note = ""
    if len(keep) < len(per_sm):
        note = (f"trace capped at {max_events} slices: only SMs {keep[0]}-{keep[-1]} of the {len(per_sm)} SMs "
                f"with CTAs are included")
    return per_sm, keep, note


def _launch_events(p: Parsed, result) -> list:
    """The "kernels" track: launch overheads, launches and the extrapolated stretches."""
    ev = []
    kres = {k.launch: k for k in getattr(result, "kernels", ())}
    for name, t_issue, t_start, t_end in p.launches:
        if t_start > t_issue:
            ev.append({"ph": "X", "pid": PID_KERNELS, "tid": 0, "name": "launch overhead", "cat": "overhead",
                       **_span(p, t_issue, t_start),
                       "args": {"launch": name, "cycles_start": _cyc(t_issue), "cycles_end": _cyc(t_start)}})
        args = {"cycles_issue": _cyc(t_issue), "cycles_start": _cyc(t_start), "cycles_end": _cyc(t_end)}
        k = kres.get(name)
        if k is not None:
            args.update(grid="x".join(map(str, k.grid)), ctas_per_sm=k.ctas_per_sm, simulated_ctas=k.simulated_ctas,
                        total_ctas=k.total_ctas, dram_read_bytes=k.dram_read_bytes, dram_write_bytes=k.dram_write_bytes)
        ev.append({"ph": "X", "pid": PID_KERNELS, "tid": 0, "name": name, "cat": "launch", **_span(p, t_start, t_end),
                   "args": args})
    for name, t0, t1, sim, tot in p.extrapolated:
        ev.append({"ph": "X", "pid": PID_KERNELS, "tid": 0, "name": "extrapolated (not simulated)", "cat": "sampling",
                   **_span(p, t0, t1),
                   "args": {"launch": name, "simulated_ctas": sim, "total_ctas": tot, "cycles_start": _cyc(t0),
                            "cycles_end": _cyc(t1)}})
    return ev


def _sm_events(p: Parsed, keep: list) -> list:
    """The "SMs" tracks of the kept SMs: a track per CTA slot, CTA lifetimes, tile ops."""
    ev, kept = [], set(keep)
    lanes_of = {}
    for (sm, _), lane in p.lane.items():
        lanes_of.setdefault(sm, set()).add(lane)
    for sm in keep:
        for lane in sorted(lanes_of.get(sm, {0})):
            tid = sm * p.lanes + lane
            ev.append(_meta(PID_SMS, "thread_name", _thread_name(sm, lane, p.lanes), tid=tid))
            ev.append(_meta(PID_SMS, "thread_sort_index", tid, tid=tid, key="sort_index"))
    for sm, slot, cta, t0, t1, launch in p.ctas:
        if sm not in kept:
            continue
        ev.append({"ph": "X", "pid": PID_SMS, "tid": sm * p.lanes + p.lane[(sm, slot)], "name": f"{launch} CTA {cta}",
                   "cat": launch, **_span(p, t0, t1),
                   "args": {"cta": cta, "launch": launch, "sm": sm, "slot": slot, "cycles_start": _cyc(t0),
                            "cycles_end": _cyc(t1)}})
    for kind, sm, cta, t0, t1, launch in p.ops:
        if sm not in kept:
            continue
        lane = p.cta_lane.get((launch, sm, cta), 0)
        ev.append({"ph": "X", "pid": PID_SMS, "tid": sm * p.lanes + lane, "name": OP_NAMES[kind], "cat": kind,
                   **_span(p, t0, t1),
                   "args": {"cta": cta, "launch": launch, "cycles_start": _cyc(t0), "cycles_end": _cyc(t1)}})
    return ev


def _memory_events(p: Parsed) -> list:
    """The "memory" counters: HBM and L2 bandwidth in GB/s over COUNTER_BINS bins."""
    ev, us, end = [], p.us, p.t_end
    for kind, label in (("hbm", "HBM bandwidth"), ("l2", "L2 bandwidth")):
        edges, rate = bandwidth_bins(p.transfers[kind], 0.0, end)
        ev.append(_meta(PID_MEMORY, "thread_name", label, tid=0))
        for t, r in zip(edges[:-1], rate):
            ev.append({"ph": "C", "pid": PID_MEMORY, "tid": 0, "name": label, "ts": round(us(t), 4),
                       "args": {"GB/s": round(float(r) * p.clock_hz / 1e9, 3)}})
        ev.append({"ph": "C", "pid": PID_MEMORY, "tid": 0, "name": label, "ts": round(us(edges[-1]), 4), "args": {"GB/s": 0.0}})
    return ev


def trace_events(p: Parsed, result, max_events: int = MAX_TRACE_EVENTS) -> dict:
    """The Chrome Trace Event document for a parsed timeline."""
    per_sm, keep, note = _kept_sms(p, max_events)
    ev = [_meta(PID_KERNELS, "process_name", "kernels"), _meta(PID_KERNELS, "process_sort_index", 0, key="sort_index"),
          _meta(PID_SMS, "process_name", "SMs"), _meta(PID_SMS, "process_sort_index", 1, key="sort_index"),
          _meta(PID_MEMORY, "process_name", "memory"), _meta(PID_MEMORY, "process_sort_index", 2, key="sort_index"),
          _meta(PID_KERNELS, "thread_name", "launches", tid=0)]
    if note:
        ev.append(_meta(PID_SMS, "process_labels", note, key="labels"))
    ev += _launch_events(p, result) + _sm_events(p, keep) + _memory_events(p)
    other = {"gpu": result.gpu, "kernel": result.kernel, "params": dict(result.params), "clock_hz": p.clock_hz,
             "time_us": result.time_us, "time_unit": "ts and dur in microseconds; args cycles_* in SM clock cycles",
             "counter_bins": COUNTER_BINS, "sms_in_trace": len(keep), "sms_with_ctas": len(per_sm)}
    if note:
        other["note"] = note
    return {"traceEvents": ev, "displayTimeUnit": "ns", "otherData": other}
