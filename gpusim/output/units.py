"""GPU config fields in the units a reader thinks in: a what-if's ``gpu.<field>`` values as TB/s,
MiB or GHz instead of 3135805726147.925, and how each row compares with the first.

A field's unit comes from its name (the config names every number with its unit, e.g.
``hbm_read_bandwidth_bytes_per_s``, ``sram_bytes_per_sm``, ``clock_hz``); one unit per column, chosen by
the column's largest value, so the values of a column line up. Sizes in bytes use binary units
(KiB, MiB: what a cache or a shared memory holds), rates use decimal ones (TB/s, TFLOP/s: what
datasheets give). Fields with no unit suffix print as they are.
"""
from __future__ import annotations

import math
import re

BINARY = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"), (1, "B"))
# name pattern -> (scale, unit) choices, largest first; the first whose scale the largest value
# reaches. Sizes: sram_bytes_per_sm, l2_bytes; rates: hbm_read_bandwidth_bytes_per_s ...
NAME_UNITS = (
    (re.compile(r"_bytes_per_s$"), ((1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1, "B/s"))),
    (re.compile(r"_flops_per_s$"), ((1e12, "TFLOP/s"), (1e9, "GFLOP/s"), (1, "FLOP/s"))),
    (re.compile(r"_bytes_per_clk(_per_sm)?$"), ((1, "B/clk"),)),
    (re.compile(r"_bytes(_per_(sm|cta\w*))?$"), BINARY),
    (re.compile(r"_hz$"), ((1e9, "GHz"), (1e6, "MHz"), (1, "Hz"))),
    (re.compile(r"_w$"), ((1, "W"),)),
    (re.compile(r"_us$"), ((1, "µs"),)),
    (re.compile(r"_ns$"), ((1, "ns"),)),
    (re.compile(r"_cycles$"), ((1, "cycles"),)),
)


def _number(v):
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v) if math.isfinite(v) else None
    try:
        x = float(str(v))
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def field_unit(column: str, values=()) -> tuple | None:
    """(scale, unit) of a ``gpu.<field>`` column (or a bare field name) for ``values``, or None
    when the field's name carries no unit (``NAME_UNITS``)."""
    name = str(column).removeprefix("gpu.")
    xs = [abs(x) for x in (_number(v) for v in values) if x is not None]
    top = max(xs) if xs else 0.0
    for pattern, choices in NAME_UNITS:
        if pattern.search(name):
            return next(((s, u) for s, u in choices if top >= s), choices[-1])
    return None


def plain(x: float) -> str:
    """A number in at most 4 significant digits, never in e-notation: 3.136, 228, 4,480."""
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.4g}" if abs(x) >= 1e-3 else f"{x:.2g}"


def fmt_field(column: str, v, unit: tuple | None = None) -> str:
    """One value of a GPU field column in the column's unit ('3.136 TB/s', '50 MiB')."""
    x = _number(v)
    if x is None:
        return "" if v is None else str(v)
    unit = unit or field_unit(column, [v])
    if unit is None:
        return str(int(x)) if x.is_integer() and abs(x) < 1e18 else plain(x)
    return f"{plain(x / unit[0])} {unit[1]}"


def ratio(x: float, first: float) -> str:
    """``x`` relative to the first row's value: '1.5x', '0.08x' ('' when either is missing or 0)."""
    if x is None or first in (None, 0):
        return ""
    r = x / first
    return f"{r:.2f}x" if r < 10 else f"{r:.3g}x"


def whatif_formats(rows: list, columns: list) -> dict:
    """column -> formatter for the ``gpu.<field>`` columns of a table: the value in the column's unit
    and, where the column varies, its ratio to the first row's value ('4.704 TB/s (1.5x)')."""
    out = {}
    for c in columns:
        vals = [r.get(c) for r in rows if r.get(c) not in ("", None)]
        unit = field_unit(c, vals)
        first = _number(vals[0]) if vals else None
        varies = len({str(v) for v in vals}) > 1

        def fmt(v, c=c, unit=unit, first=first, varies=varies):
            text = fmt_field(c, v, unit)
            r = ratio(_number(v), first) if varies else ""
            return f"{text} ({r})" if r else text
        out[c] = fmt
    return out


TIME_RATIO = "time_vs_first"


def with_time_ratio(rows: list) -> list:
    """``rows`` with a ``time_vs_first`` cell: each ok row's time over the first ok row's ('0.85x':
    15% faster than the first row, the baseline of a what-if)."""
    ok = [r for r in rows if r.get("status") == "ok" and _number(r.get("time_us"))]
    first = _number(ok[0]["time_us"]) if ok else None
    return [dict(r, **{TIME_RATIO: ratio(_number(r.get("time_us")), first) if r in ok else ""}) for r in rows]


def fmt_us(x: float) -> str:
    """A time in microseconds for a cell: 4,480 / 207.0 / 9.53 (one column reads alike)."""
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.1f}" if abs(x) >= 10 else f"{x:.2f}"
