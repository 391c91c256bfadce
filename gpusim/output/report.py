"""The figures for a finished scenario run: ``make_reports`` picks the ones that apply and writes them.

This module owns only the choice and the error policy; each figure lives in its own module:

* plots.py: ``plot_<metric>.png`` + ``plot_<metric>.csv`` (time, TFLOP/s, DRAM bytes vs the swept axis,
  a parameter or a GPU field ``gpu.<field>``; a run without one says why in one line);
* roofline.py: ``roofline_<gpu>.png`` (every ok point under that GPU's roofs);
* traffic.py: ``traffic.png`` (bytes across HBM<->L2 and L2->SM per launch, naive vs flash attention);
* heatmap.py: ``tile_heatmap.png`` (time per BLOCK_M x BLOCK_N, infeasible cells hatched).

Inputs are results.csv / kernels.csv rows as dicts; values may be numbers or strings. Rows whose
status is not ok carry no metrics and are left out (the heatmap shows them as hatched cells).
A plot that does not apply is skipped; a plot that fails is reported on stderr and skipped, so
reporting never fails a run.
"""
from __future__ import annotations

from pathlib import Path

from .heatmap import tile_grid, tile_heatmap
from .plots import line_plots
from .points import sweep_axis, warn
from .roofline import rooflines
from .style import titles
from .tables import gpu_field_columns
from .traffic import traffic_chart, traffic_groups

__all__ = ["make_reports", "line_plots", "rooflines", "traffic_chart", "traffic_groups", "tile_heatmap",
           "tile_grid", "sweep_axis", "titles"]


def sweep_keys(sweep) -> list:
    """A scenario's swept fields in its order, those of ``zip`` groups included."""
    keys = []
    for k, v in (sweep if isinstance(sweep, dict) else {}).items():
        if k != "zip":
            keys.append(k)
            continue
        for g in (v if isinstance(v, list) else [v]):
            keys += list(g) if isinstance(g, dict) else []
    return keys


def make_reports(out: Path, sc, rows: list, krows: list, fmt: str = "png") -> list:
    """Write every plot that applies to this run into ``out``; returns the written paths.

    Never raises on odd inputs: a plot that does not apply is skipped, one that fails is
    reported on stderr and skipped."""
    out = Path(out)
    fmt = fmt if fmt in ("png", "svg") else "png"
    rows = list(rows or [])
    krows = list(krows or [])
    if not rows:
        return []
    # the GPU fields a what-if changes (``gpu.<field>`` columns) are drawn against like parameters
    param_names = list(getattr(sc, "param_names", None) or [])
    param_names += [c for c in gpu_field_columns(rows) if c not in param_names]
    data = getattr(sc, "data", None) or {}
    sweep = data.get("sweep") if isinstance(data, dict) else None
    sweep_order = [k for k in sweep_keys(sweep) if k in param_names]
    written = []
    jobs = (("line plots", lambda: line_plots(out, rows, param_names, fmt, sweep_order)),
            ("roofline", lambda: rooflines(out, rows, param_names, fmt, sweep_order)),
            ("traffic", lambda: traffic_chart(out, rows, krows, fmt)),
            ("tile heatmap", lambda: tile_heatmap(out, rows, param_names, fmt)))
    for name, job in jobs:
        try:
            written += job()
        except Exception as e:  # reporting must not fail a finished run
            warn(f"{name} skipped: {type(e).__name__}: {e}")
    return written
