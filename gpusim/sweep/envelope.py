"""Within one what-if sweep, a GPU at least as good as another in every field is never slower.

A GPU whose every resource is at least as fast, as big and as plentiful as another's
(``backends.sim.headroom.improves_on``: same name, same L2 geometry and power physics) can run
that GPU's schedule, leaving its faster resources partly idle. The discrete-event model finds each
point's own schedule, and its event order (which CTA a faster L2 lets start first, the clock the
power limit picks from it) can make such a GPU up to a few percent slower: GEMM 2048^3 on the
h200 at L2 x1.1 26.72 us and x1.25 27.85 us. So after a sweep, a point whose GPU improves on
another point's (the same kernel and parameters) takes the faster of the two times, and its
``reason`` says whose schedule it is. Each point's own simulation stays in kernels.csv.

The envelope is over the points of one sweep: the same what-if alone (``--set gpu.X``) gives its
own schedule's time.
"""
from __future__ import annotations

import json

from ..backends.sim.headroom import improves_on
from ..output.tables import SCHEDULE_OF

# the columns that follow the schedule (the bytes a point moves are its own either way)
TIMING = ("time_us", "time_us_lo", "time_us_hi", "time_us_sim", "calibration_factor", "bound", "clock_mhz",
          "tflops", "dram_gbps", "interval")


def _key(pt) -> str:
    return json.dumps([pt.gpu, pt.kernel, pt.kernel_ref, pt.params, pt.fidelity, pt.calibration], sort_keys=True,
                      default=str)


def _label(pt, fields: list) -> str:
    changed = [f"gpu.{f}={pt.gpu_overrides[f]:g}" if isinstance(pt.gpu_overrides.get(f), (int, float))
               else f"gpu.{f}={pt.gpu_overrides[f]}" for f in fields if f in pt.gpu_overrides]
    return ", ".join(changed) or f"{pt.gpu} unchanged"


def monotone(points: list, rows: list, fields: list) -> list:
    """``rows`` (one per point of ``points``, results.csv order) with each ok row's timing columns
    taken from the fastest ok row whose GPU it improves on, where that one is faster."""
    if not fields:
        return rows
    groups: dict = {}
    for i, (pt, row) in enumerate(zip(points, rows)):
        if row.get("status") == "ok" and pt.config is not None and isinstance(row.get("time_us_sim"), (int, float)):
            groups.setdefault(_key(pt), []).append(i)
    out = list(rows)
    for idx in groups.values():
        for i in idx:
            faster = [j for j in idx if j != i and rows[j]["time_us_sim"] < rows[i]["time_us_sim"]
                      and improves_on(points[i].config, points[j].config)]
            if not faster:
                continue
            j = min(faster, key=lambda k: rows[k]["time_us_sim"])
            row = dict(rows[i])
            row.update({c: rows[j][c] for c in TIMING if c in rows[j]})
            row["reason"] = (f"{SCHEDULE_OF}{_label(points[j], fields)} ({rows[i]['time_us_sim']:.4g} us on its "
                             f"own): every field of this GPU is at least as good, so it can run it")
            out[i] = row
    return out
