"""Plain-text tables for the terminal: one formatter, and the table ``gpusim run`` prints.

``format_table(rows, columns, ...)`` lays out any rows (dicts, or sequences in column order) in
padded columns separated by two spaces, under a header and an optional rule of dashes; every
command that prints a table (run, validate, calibrate) goes through it so they read alike.
``run_table(rows, param_names)`` is the results table of ``gpusim run``: the layout the README shows.

Hand-written rather than ``pandas.DataFrame.to_string``: pandas separates columns by one space,
has no rule line and costs about half a second to import for a table of a few dozen lines.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

RUN_METRICS = ("status", "time_us", "time_us_range", "time_us_sim", "tflops", "clock_mhz", "dram_read_bytes", "dram_write_bytes", "l2_hit_rate",
               "bound", "max_rel_err")
RUN_HEADERS = {"dram_read_bytes": "dram_read_MB", "dram_write_bytes": "dram_write_MB", "time_us_range": "90% range", "time_us_sim": "sim_us",
               "time_vs_first": "vs row 1"}


def time_range(row: Mapping) -> str:
    """The ``90% range`` cell: ``lo-hi`` in us from time_us_lo/time_us_hi, ``bound`` for an
    -ideal config's time, empty when the row has neither."""
    lo, hi = row.get("time_us_lo"), row.get("time_us_hi")
    if lo not in ("", None) and hi not in ("", None):
        return f"{float(lo):.1f}-{float(hi):.1f}"
    return "bound" if row.get("interval") == "bound" else ""


def _cell(v) -> str:
    return "" if v is None else str(v)


def format_table(rows: Sequence, columns: Sequence[str], *, headers: Mapping[str, str] | None = None,
                 formats: Mapping[str, Callable] | None = None, align: str = "right", rule: bool = True) -> str:
    """``rows`` as text columns, one line per row, under a header line (and a rule of dashes if ``rule``).

    rows: dicts (a missing key is an empty cell) or sequences whose items follow ``columns``.
    headers: column -> header text (default: the column name). formats: column -> f(value) -> str
    for non-empty values (default: ``str``; None and '' print as nothing). align: "right" or "left";
    every cell is padded to its column's width, two spaces between columns."""
    if align not in ("right", "left"):
        raise ValueError(f"align: {align!r}; allowed: 'right', 'left'")
    headers, formats = headers or {}, formats or {}
    table = []
    for r in rows:
        values = [r.get(c, "") for c in columns] if isinstance(r, Mapping) else list(r)
        line = []
        for c, v in zip(columns, values):
            line.append(formats[c](v) if c in formats and v not in ("", None) else _cell(v))
        table.append(line)
    hdr = [str(headers.get(c, c)) for c in columns]
    widths = [max([len(h)] + [len(line[i]) for line in table if i < len(line)]) for i, h in enumerate(hdr)]

    def join(cells):
        return "  ".join(c.rjust(w) if align == "right" else c.ljust(w) for c, w in zip(cells, widths))

    out = [join(hdr)] + (["  ".join("-" * w for w in widths)] if rule else [])
    return "\n".join(out + [join(line) for line in table])


def shown_params(rows: list, param_names: list) -> list:
    """The parameters the run table shows: those that vary over ``rows``; when none does (a single
    point), every parameter some row has a value for, so the table still says what ran."""
    swept = [p for p in param_names if len({_cell(r.get(p)) for r in rows}) > 1]
    if swept:
        return swept
    return [p for p in param_names if any(_cell(r.get(p)) != "" for r in rows)]


def gpu_field_columns(rows: list) -> list:
    """The ``gpu.<field>`` columns of ``rows`` (GPU fields a what-if changes), in row order."""
    return list(dict.fromkeys(c for r in rows if isinstance(r, Mapping) for c in r
                              if isinstance(c, str) and c.startswith("gpu.")))


def gpu_value(v) -> str:
    """A GPU field's value in a table cell: a whole number without its ``.0``, otherwise as given."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e18:
        return str(int(v))
    if isinstance(v, dict):
        return ",".join(f"{k}={gpu_value(x)}" for k, x in v.items())
    return str(v)


def run_table(rows: list, param_names: list) -> str:
    """The readable table `gpusim run` prints, then one line per distinct reason a point is not ok.
    Every GPU field the run changes (``--set gpu.X``, a ``gpu.<field>`` sweep) has its own column."""
    from .units import TIME_RATIO, whatif_formats, with_time_ratio

    gcols = gpu_field_columns(rows)
    metrics = list(RUN_METRICS)
    if gcols:       # a what-if: each row's time against the first row's, the baseline
        rows = with_time_ratio(rows)
        metrics.insert(metrics.index("time_us_range") + 1, TIME_RATIO)
    cols = ["gpu", "kernel"] + shown_params(rows, param_names) + gcols + metrics
    formats = {**whatif_formats(rows, gcols),
               "dram_read_bytes": lambda v: f"{float(v) / 1e6:.1f}", "dram_write_bytes": lambda v: f"{float(v) / 1e6:.1f}",
               "l2_hit_rate": lambda v: f"{float(v):.1%}", "time_us": lambda v: f"{float(v):.1f}",
               "time_us_sim": lambda v: f"{float(v):.1f}",
               "tflops": lambda v: f"{float(v):.1f}"}
    rows = [dict(r, time_us_range=time_range(r)) for r in rows]
    out = [format_table(rows, cols, headers=RUN_HEADERS, formats=formats)]
    if any(r.get("bound") for r in rows):
        out.append(BOUND_LEGEND)
    cals = sorted({str(r.get("calibration")) for r in rows if r.get("calibration") and r.get("status") == "ok"})
    if cals:
        out.append(f"calibration: {', '.join(cals)} ({CALIBRATION_NOTE})")
    taken = [r for r in rows if r.get("status") == "ok" and str(r.get("reason", "")).startswith(SCHEDULE_OF)]
    if taken:
        out.append(f"{len(taken)} of {len(rows)} points: the time of a weaker GPU's schedule in this sweep, which a "
                   f"GPU at least as good in every field can run (results.csv reason)")
    reasons = {}
    for r in rows:
        if r.get("status") != "ok":
            k = (r["kernel"], r["status"], r.get("reason", ""))
            reasons[k] = reasons.get(k, 0) + 1
    for (kernel, status, reason), n in reasons.items():
        out.append(f"{kernel} {status}{f' ({n} points)' if n > 1 else ''}: {reason}")
    views = sorted({v for r in rows for v in str(r.get("compiler") or "").split("+") if v})
    if views:
        out.append(f"compiler view: {', '.join(views)} ({COMPILER_NOTE[views == ['estimate']]})")
    return "\n".join(out)


# how a point's reason starts when it takes a weaker GPU's schedule in a what-if sweep (sweep/envelope.py)
SCHEDULE_OF = "the schedule of "

# the line under a table with a ``bound`` column (result.Result.bound)
BOUND_LEGEND = ("bound: what limits the time: tensor or simt (that SM pipe busy), memory (DRAM or L2 bandwidth), "
                "power (the clock lowered to the power limit), launch (launch overheads), grid (under half the "
                "SMs have work), latency (waiting on loads or dependent instructions)")

# the line under a table of calibrated points (gpusim.calibration)
CALIBRATION_NOTE = ("time_us is the mechanistic sim_us corrected by a model learned from measured points; "
                    "--set calibration=off gives the mechanistic model alone; docs/calibration.md")

# what the closing line of the run table says about the compiler's view the points were timed with
COMPILER_NOTE = {True: "registers, spills and instruction mix estimated; with triton installed they come "
                       "from its compiler, docs/resources.md",
                 False: "registers, spills and the SASS instruction mix from Triton's compiler"}
