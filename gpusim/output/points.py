"""Reading result rows for the figures: cell values, the sweep's structure, and the labels built from them.

Rows are results.csv / kernels.csv rows as dicts whose values may be numbers or strings (a run's own
rows, or rows read back from CSV); ``''`` means a kernel does not take that parameter. Nothing here
draws: plots.py, roofline.py, traffic.py and heatmap.py share these helpers.
"""
from __future__ import annotations

import math
import re
import sys
from pathlib import Path

SHORT = {"attention_naive": "naive", "attention_flash": "flash", "elementwise_chain": "chain",
         "elementwise_fused": "fused", "matmul": "matmul"}
ABBREV = {"seq_len": "N", "BLOCK_M": "BM", "BLOCK_N": "BN", "BLOCK_K": "BK", "num_stages": "stages",
          "num_warps": "warps", "head_dim": "d", "batch": "B", "heads": "H"}


# --------------------------------------------------------------------------- values
def num(v):
    """A finite float from a number or numeric string, else None."""
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def sum_or_none(*xs):
    return None if any(x is None for x in xs) else sum(xs)


def dram_bytes(r):
    """DRAM read + write bytes of a row, or None when either is missing."""
    return sum_or_none(num(r.get("dram_read_bytes")), num(r.get("dram_write_bytes")))


def pval(v):
    """A parameter value normalised for grouping and sorting: int, float, bool or str ('' = not taken)."""
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return int(v) if float(v).is_integer() else float(v)
    s = "" if v is None else str(v).strip()
    if s.lower() in ("true", "false"):
        return s.lower() == "true"
    for conv in (int, float):
        try:
            return conv(s)
        except ValueError:
            pass
    return s


def is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def sort_key(v):
    """Numbers first in numeric order, then everything else by its text."""
    return (0, v, "") if is_number(v) else (1, 0, str(v))


def is_ok(r) -> bool:
    return str(r.get("status", "")).strip() == "ok"


def is_pow2(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0 and v & (v - 1) == 0


def fmt_val(v) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def fmt_named(name, v) -> str:
    """A value of field ``name``: a GPU field (``gpu.<field>``) in its unit ('50 MiB', '3.136 TB/s'),
    anything else as ``fmt_val``."""
    if str(name).startswith("gpu."):
        from .units import fmt_field

        return fmt_field(name, v)
    return fmt_val(v)


def compact(v) -> str:
    """2^26 instead of 67108864 for large powers of two."""
    return f"2^{v.bit_length() - 1}" if is_pow2(v) and v >= 1 << 16 else fmt_val(v)


def fmt_bytes(b: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(b) >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b:.0f} B"


def fmt_rate(x: float, unit: str) -> str:
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if x >= scale:
            return f"{x / scale:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def distinct(rows, name) -> list:
    """Distinct non-empty values of ``name`` over ``rows``, sorted."""
    vals = {pval(r.get(name, "")) for r in rows}
    vals.discard("")
    return sorted(vals, key=sort_key)


def param_help(name: str) -> str:
    """The help text the first kernel that takes parameter ``name`` gives it ('' if none does);
    a ``gpu.<field>`` column is a GPU config field changed by a what-if."""
    from ..kernels import KERNELS

    if str(name).startswith("gpu."):
        return "GPU config field, what-if"
    for spec in KERNELS.values():
        p = spec.param(name)
        if p is not None:
            return p.help
    return ""


def safe_name(s: str) -> str:
    """``s`` as a file-name part (a scenario file name loses its .yaml)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(str(s)).stem if str(s).endswith((".yaml", ".yml")) else str(s))


def warn(msg: str):
    """A figure that could not be drawn: one line on stderr (reporting never fails a run)."""
    print(f"gpusim report: {msg}", file=sys.stderr)


# --------------------------------------------------------------------------- sweep structure
def sweep_axis(rows, param_names, sweep_order=()):
    """The swept parameter with the most distinct values (ties: numeric first, then scenario order), or None."""
    cands = []
    order = list(sweep_order) + [p for p in param_names if p not in sweep_order]
    for i, n in enumerate(order):
        if n in ("gpu", "kernel") or n not in param_names:
            continue
        vals = distinct(rows, n)
        if len(vals) > 1:
            cands.append((len(vals), all(is_number(v) for v in vals), -i, n))
    return max(cands)[3] if cands else None


def varying(rows, param_names, exclude=()) -> list:
    """'gpu' if more than one GPU ran, then every parameter with more than one value, minus ``exclude``."""
    out = [n for n in ("gpu",) if len(distinct(rows, n)) > 1]
    return out + [n for n in param_names if n not in exclude and len(distinct(rows, n)) > 1]


def series_label(r, varying_names, with_kernel: bool) -> str:
    """'attention_flash h100 BLOCK_M=64': a line's legend entry."""
    parts = [str(r.get("kernel", ""))] if with_kernel else []
    for n in varying_names:
        v = pval(r.get(n, ""))
        if v == "":
            continue
        parts.append(str(v) if n == "gpu" else f"{n}={fmt_named(n, v)}")
    return " ".join(parts) or str(r.get("kernel", ""))


def point_label(r, axis, varying_names) -> str:
    """'flash N=4096 BM=64': a short label next to one point."""
    parts = [SHORT.get(str(r.get("kernel")), str(r.get("kernel")))]
    for n in ([axis] if axis else []) + [n for n in varying_names if n not in (axis, "gpu")]:
        v = pval(r.get(n, ""))
        if v != "":
            parts.append(str(v) if n == "dtype" else f"{ABBREV.get(n, n)}={compact(v)}")
    return " ".join(parts)


def constants_line(rows, names, skip=()) -> str:
    """'gpu h100 · batch=4 heads=16 ...' for the fields every row shares."""
    head = [str(distinct(rows, f)[0]) for f in ("gpu", "kernel") if f not in skip and len(distinct(rows, f)) == 1]
    n_kernels = len(distinct(rows, "kernel"))
    common, partial = [], {}
    for n in names:
        vals = distinct(rows, n)
        if n in skip or len(vals) != 1:
            continue
        takers = tuple(distinct([r for r in rows if pval(r.get(n, "")) != ""], "kernel"))
        item = f"{n}={fmt_named(n, vals[0])}"
        if len(takers) == n_kernels:
            common.append(item)
        else:
            partial.setdefault(takers, []).append(item)
    parts = head + ([" ".join(common)] if common else [])
    parts += [f"{'/'.join(SHORT.get(str(k), str(k)) for k in t)} only: {' '.join(p)}" for t, p in partial.items()]
    return " · ".join(parts)
