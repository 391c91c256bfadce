"""Validation records -> table rows, and the rows as CSV.

Owns the columns of ``validation.csv``, a point's combined status (measurement + prediction),
``build_rows`` (one ``scope=point`` row per point, one ``scope=launch`` row per launch), the tile
sweep grouping (``group_key``), CSV writing and reading, and loading a saved ``validation.json``.
"""
from __future__ import annotations

import csv
import gzip
import io
import json
import math
from pathlib import Path

from ...kernels import ALL_PARAM_NAMES
from .common import median_spread, pct

TILE_PARAMS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "BLOCK", "num_stages", "num_warps")
BASE_COLUMNS = ("point", "scope", "launch", "kernel", "gpu")
METRIC_COLUMNS = ("group", "measured_us", "measured_spread_pct", "predicted_us", "error_pct",
                  "measured_dram_read_bytes", "measured_dram_write_bytes", "predicted_dram_read_bytes",
                  "predicted_dram_write_bytes", "dram_error_pct", "measured_l2_bytes", "predicted_l2_bytes",
                  "reference_eager_us", "reference_sdpa_us", "max_rel_err", "status", "reason")
NUMERIC_COLUMNS = {c for c in METRIC_COLUMNS if c not in ("group", "status", "reason")} | {"point"}


def group_key(kernel: str, params: dict) -> str:
    """Points with the same key differ only in tile parameters (a tile sweep group)."""
    rest = ",".join(f"{k}={params[k]}" for k in sorted(params) if k not in TILE_PARAMS)
    return f"{kernel}: {rest}"


def tile_label(params: dict) -> str:
    """The tile parameters of a point (or row) that are set, as ``BLOCK_M=64 num_warps=4``."""
    return " ".join(f"{k}={params[k]}" for k in TILE_PARAMS if params.get(k) not in (None, ""))


def combined_status(rec: dict) -> tuple:
    """(status, reason) of a point from its measurement and its prediction."""
    pred = rec.get("predicted") or {}
    st, reason = rec.get("status", "skipped"), rec.get("reason", "")
    pst = pred.get("status")
    if st == "gpu-error" and pst == "infeasible" and any(
            s in reason.lower() for s in ("outofresources", "out of resource", "shared memory")):
        return "infeasible", f"GPU: {reason}; simulator: {pred.get('reason', '')}"
    if st != "ok":
        return st, reason
    if pst is None:
        return "sim-missing", "no prediction"
    if pst != "ok":
        return f"sim-{pst}", pred.get("reason", "")
    return "ok", ""


def build_rows(records: list, gpu: str, param_names: list | None = None) -> list:
    """CSV rows: one ``scope=point`` row per point and one ``scope=launch`` row per launch."""
    if param_names is None:
        seen = {k for r in records for k in r.get("params", {})}
        param_names = [p for p in ALL_PARAM_NAMES if p in seen]
    rows = []
    for rec in records:
        status, reason = combined_status(rec)
        params = rec.get("params", {})
        base = {"point": rec["index"], "kernel": rec["kernel"], "gpu": gpu}
        base.update({p: params.get(p, "") for p in param_names})
        base["group"] = rec.get("group") or group_key(rec["kernel"], params)
        pred = rec.get("predicted") or {}
        pred_ok = pred.get("status") == "ok"
        meas = rec.get("measured") or {}
        ncu = rec.get("ncu") or {}
        nl = ncu.get("launches") or []
        ref = rec.get("reference") or {}
        m_us, spread = median_spread(meas.get("total_us"))
        p_us = pred.get("total_us") if pred_ok else None
        mr = sum(x["dram_read_bytes"] for x in nl) if nl and all(x.get("dram_read_bytes") is not None for x in nl) else None
        mw = sum(x["dram_write_bytes"] for x in nl) if nl and all(x.get("dram_write_bytes") is not None for x in nl) else None
        ml2 = sum(x["l2_bytes"] for x in nl) if nl and all(x.get("l2_bytes") is not None for x in nl) else None
        pr = pred.get("dram_read_bytes") if pred_ok else None
        pw = pred.get("dram_write_bytes") if pred_ok else None
        # the L2 slices' bytes (what lts__t_bytes counts): reads the coalescer did not merge, and writes
        pl2 = (pred.get("l2_read_bytes", 0) - pred.get("l2_merged_bytes", 0) + pw) if pred_ok else None
        rows.append({**base, "scope": "point", "launch": "", "measured_us": m_us, "measured_spread_pct": spread,
                     "predicted_us": p_us, "error_pct": pct(p_us, m_us) if status == "ok" else None,
                     "measured_dram_read_bytes": mr, "measured_dram_write_bytes": mw,
                     "predicted_dram_read_bytes": pr, "predicted_dram_write_bytes": pw,
                     "dram_error_pct": pct(pr + pw, mr + mw) if None not in (pr, pw, mr, mw) else None,
                     "measured_l2_bytes": ml2, "predicted_l2_bytes": pl2,
                     "reference_eager_us": ref.get("eager_us"), "reference_sdpa_us": ref.get("sdpa_us"),
                     "max_rel_err": rec.get("max_rel_err"), "status": status, "reason": reason})
        names = list(meas.get("launch_names") or [])
        plaunch = (pred.get("launches") or []) if pred_ok else []
        for j in range(max(len(names), len(plaunch))):
            pl = plaunch[j] if j < len(plaunch) else {}
            name = names[j] if j < len(names) else pl.get("launch", f"launch{j}")
            lm, lsp = median_spread((meas.get("per_launch_us") or {}).get(name))
            lp = pl.get("time_us")
            nj = nl[j] if j < len(nl) else {}
            lmr, lmw = nj.get("dram_read_bytes"), nj.get("dram_write_bytes")
            lpr, lpw = pl.get("dram_read_bytes"), pl.get("dram_write_bytes")
            rows.append({**base, "scope": "launch", "launch": name, "measured_us": lm, "measured_spread_pct": lsp,
                         "predicted_us": lp, "error_pct": pct(lp, lm) if status == "ok" else None,
                         "measured_dram_read_bytes": lmr, "measured_dram_write_bytes": lmw,
                         "predicted_dram_read_bytes": lpr, "predicted_dram_write_bytes": lpw,
                         "dram_error_pct": pct(lpr + lpw, lmr + lmw) if None not in (lpr, lpw, lmr, lmw) else None,
                         "measured_l2_bytes": nj.get("l2_bytes"),
                         "predicted_l2_bytes": (pl.get("l2_read_bytes", 0) - pl.get("l2_merged_bytes", 0) + lpw)
                         if lpw is not None else None,
                         "reference_eager_us": None, "reference_sdpa_us": None, "max_rel_err": None,
                         "status": status, "reason": reason})
    return rows


def cell(v):
    """A value as written in the CSV and the tables."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        return f"{v:.6g}"
    return v


def param_columns(rows: list) -> list:
    """The kernel-parameter columns present in ``rows``, in the kernels' order."""
    known = set(BASE_COLUMNS) | set(METRIC_COLUMNS)
    extra = []
    for r in rows:
        for k in r:
            if k not in known and k not in extra:
                extra.append(k)
    return [p for p in ALL_PARAM_NAMES if p in extra] + [p for p in extra if p not in ALL_PARAM_NAMES]


def rows_to_csv(rows: list) -> str:
    cols = list(BASE_COLUMNS) + param_columns(rows) + list(METRIC_COLUMNS)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({c: cell(r.get(c)) for c in cols})
    return buf.getvalue()


def to_number(v, numeric: bool):
    if not numeric:
        return v
    if v is None or v == "":
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def load_rows(csv_path) -> list:
    """Rows of a saved validation.csv (or .csv.gz), numbers as floats (empty cells as None)."""
    opener = gzip.open if str(csv_path).endswith(".gz") else open
    with opener(csv_path, "rt", newline="") as f:
        return [{k: to_number(v, k in NUMERIC_COLUMNS) for k, v in r.items()} for r in csv.DictReader(f)]


def num(r, k):
    """Row value ``k`` as a float (None when empty or not a finite number)."""
    return to_number(r.get(k), True)


def validation_file(path) -> Path | None:
    """The saved validation of ``path``: the file itself, or a directory's ``validation.json`` or
    ``validation.json.gz`` (recorded data is stored compressed); None when there is none."""
    p = Path(path)
    if p.is_file():
        return p
    return next((q for q in (p / "validation.json", p / "validation.json.gz") if q.is_file()), None)


def load_validation(path) -> dict:
    p = validation_file(path)
    if p is None:
        raise FileNotFoundError(f"{path}: no validation.json or validation.json.gz")
    text = gzip.decompress(p.read_bytes()).decode() if p.suffix == ".gz" else p.read_text()
    return json.loads(text)


def rows_from_json(validation_json_path) -> list:
    """Rows of a saved validation with the predictions recorded at the time."""
    data = load_validation(validation_json_path)
    return build_rows(data["points"], data.get("gpu", "?"), data.get("param_names"))
