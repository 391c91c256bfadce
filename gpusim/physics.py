"""Physics every simulated result must obey; a result that breaks it is ``unphysical``, never ok.

``violations`` lists what a result breaks:

- a negative, NaN or infinite number;
- a time below a roofline bound of the config it ran on (its FLOPs at the peak rate, its DRAM
  bytes at the peak bandwidth), or a utilisation above 1;
- DRAM traffic below the compulsory bytes (``compulsory_bytes``): the L2 is empty when a point
  starts and every store is written through to DRAM, so each input a launch loads crosses the
  DRAM at least once and each output a launch stores is written at least once. ``COMPULSORY_TOL``
  allows the sampled launches' extrapolation (``fidelity: fast``);
- a clock below the config's maximum while the launch's predicted power is below the power
  limit (the clock only drops to meet the limit), beyond ``THROTTLE_TOL``.

``row_violations`` checks the same on a saved results.csv row and its kernels.csv rows (a cached
point), together with the derived columns (``tflops``, ``dram_gbps``) against the numbers they
derive from. ``UTIL_TOL`` allows rounding in the model's bookkeeping.
"""
from __future__ import annotations

import math

UTIL_TOL = 0.02          # a utilisation may exceed 1 by this much (rounding), never more
COMPULSORY_TOL = 0.02    # DRAM bytes may fall this far below the compulsory bytes (sampling), never more
THROTTLE_TOL = 0.01      # a lowered clock needs a predicted power within 1% of the limit
DERIVED_TOL = 0.01       # tflops / dram_gbps agree with flops, bytes and time to this (4 digits saved)


# The exact check's tolerance: a point whose max_rel_err against the float64 reference exceeds
# its storage dtype's value gets status ``mismatch`` (the same tolerances the H200 validation uses).
# fp8: the unit roundoff of the format (2^-4 for e4m3, 2^-3 for e5m2): a kernel that rounds an
# intermediate to fp8 (flash's P) carries one such rounding per element, about 0.4 u in the mean.
CHECK_TOLERANCE = {"fp16": 5e-3, "bf16": 2e-2, "fp32": 1e-2, "fp8e4m3": 2.0 ** -4, "fp8e5m2": 2.0 ** -3}


def check_tolerance(params: dict) -> float:
    """The max_rel_err a point with these parameters may have (by its ``dtype``, fp16 when none)."""
    return CHECK_TOLERANCE.get(params.get("dtype", "fp16"), max(CHECK_TOLERANCE.values()))


def check_status(params: dict, max_rel_err: float | None) -> tuple[str, str]:
    """(status, reason) of a simulated point given its exact check: ok, or mismatch with the error."""
    if max_rel_err is None:
        return "ok", ""
    tol = check_tolerance(params)
    if max_rel_err <= tol:     # NaN fails this comparison too
        return "ok", ""
    return "mismatch", (f"exact check failed: max_rel_err {max_rel_err:.3g} exceeds the "
                        f"{params.get('dtype', 'fp16')} tolerance {tol:g} against the float64 reference")


def _bad(x) -> bool:
    return x is None or not isinstance(x, (int, float)) or isinstance(x, bool) or not math.isfinite(x) or x < 0


def compulsory_bytes(workload) -> tuple:
    """(bytes read, bytes written) that any run of ``workload`` moves through DRAM: every input
    tensor some launch loads, read once, and every output tensor some launch stores, written once
    (storage dtype sizes). Tensors that only pass between launches count in neither."""
    from .dsl import ir

    loaded, stored = set(), set()
    for launch in workload.launches:
        for op in ir.walk(launch.program.body):
            if isinstance(op, ir.Load):
                loaded.add(op.tensor.name)
            elif isinstance(op, ir.Store):
                stored.add(op.tensor.name)
    t = workload.tensors
    reads = sum(t[n].nbytes for n in workload.inputs if n in loaded and n in t)
    writes = sum(t[n].nbytes for n in workload.outputs if n in stored and n in t)
    return reads, writes


def _compulsory_problems(dram_read: float, dram_write: float, compulsory) -> list:
    if compulsory is None:
        return []
    out = []
    for what, got, need in (("read", dram_read, compulsory[0]), ("write", dram_write, compulsory[1])):
        if need and got < need * (1 - COMPULSORY_TOL):
            out.append(f"DRAM {what} bytes {got:.4g} are below the compulsory {need:.4g} (every "
                       f"{'input read' if what == 'read' else 'output written'} once, from an empty L2)")
    return out


def _throttle_problems(launches, cfg) -> list:
    """``launches``: (name, clock in Hz or None, predicted watts or None) of each launch."""
    limit = getattr(cfg, "power_limit_w", None) if cfg is not None else None
    if not limit:
        return []
    out = []
    for name, clock_hz, watts in launches:
        if clock_hz is None or watts is None:
            continue
        if clock_hz < cfg.clock_hz * (1 - 1e-3) and watts < limit * (1 - THROTTLE_TOL):
            out.append(f"launch {name} runs at {clock_hz / 1e6:.0f} MHz, below the maximum {cfg.clock_hz / 1e6:.0f} MHz, "
                       f"while its predicted power {watts:.4g} W is below the {limit:.4g} W limit")
    return out


def _bound_problems(time_us: float, flops: float, peak_flops: float | None) -> list:
    if peak_flops and flops / peak_flops > time_us * 1e-6 * (1 + UTIL_TOL):
        return [f"time {time_us:.4g} us is below the compute bound "
                f"{flops / peak_flops * 1e6:.4g} us ({flops:.4g} FLOP at {peak_flops:.4g}/s)"]
    return []


def violations(r, workload=None, cfg=None) -> list[str]:
    """What ``r`` (a simulated Result) breaks; empty when it is physical. With ``workload`` its
    DRAM bytes are checked against the compulsory bytes, with ``cfg`` (the config it ran on) its
    clocks against its predicted power."""
    out = []
    numbers = {"time_us": r.time_us, "dram_read_bytes": r.dram_read_bytes, "dram_write_bytes": r.dram_write_bytes,
               "l2_read_bytes": r.l2_read_bytes, "flops": r.flops}
    for name, v in numbers.items():
        if _bad(v):
            out.append(f"{name} is {v}")
    if out:
        return out
    if r.max_rel_err is not None and not math.isfinite(r.max_rel_err):
        out.append(f"max_rel_err is {r.max_rel_err}")
    out += _bound_problems(r.time_us, r.flops, r.peak_flops_per_s)
    for name, u in r.utilisation().items():
        if _bad(u) or u > 1 + UTIL_TOL:
            out.append(f"{name} utilisation {u:.3g} is above 1")
    if workload is not None:
        out += _compulsory_problems(r.dram_read_bytes, r.dram_write_bytes, compulsory_bytes(workload))
    out += _throttle_problems([(k.launch, k.clock_hz, k.power_w) for k in r.kernels], cfg)
    return out


def judge(r, workload=None, cfg=None):
    """``r`` unchanged when physical (or not simulated), else the same result with status
    ``unphysical`` and the violations as its reason."""
    if r.status not in ("ok", "mismatch"):
        return r
    v = violations(r, workload, cfg)
    if not v:
        return r
    from dataclasses import replace

    return replace(r, status="unphysical", reason="breaks physics: " + "; ".join(v))


# --------------------------------------------------------------------------- saved rows
ROW_NUMBERS = ("time_us", "dram_read_bytes", "dram_write_bytes", "l2_read_bytes", "flops", "tflops", "dram_gbps",
               "sram_read_bytes", "tensor_flops")
KERNEL_NUMBERS = ("time_us", "dram_read_bytes", "dram_write_bytes", "l2_read_bytes", "flops")


def _near(a: float, b: float, rel: float, absolute: float = 0.0) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b)) + absolute


def row_violations(row: dict, krows: list, cfg, params: dict | None = None, workload=None) -> list[str]:
    """What a saved point (its results.csv ``row`` and kernels.csv ``krows``, as ``run_point``
    wrote them, computed on ``cfg``) breaks; empty when it is physical or was not simulated. The
    same checks as ``violations``, on the saved (rounded) numbers, plus the derived columns."""
    status = row.get("status")
    if status not in ("ok", "mismatch"):
        return []
    out = [f"{n} is {_brief(row.get(n))}" for n in ROW_NUMBERS if _bad(row.get(n))]
    for i, k in enumerate(krows):
        if not isinstance(k, dict):
            return [f"kernel row {i} is not a mapping"]
        out += [f"launch {_brief(k.get('launch'))}: {n} is {_brief(k.get(n))}" for n in KERNEL_NUMBERS if _bad(k.get(n))]
    if out:
        return out
    t, flops = row["time_us"], row["flops"]
    rd, wr = row["dram_read_bytes"], row["dram_write_bytes"]
    if t <= 0:
        return [f"time_us is {t!r}"]
    if not _near(row["tflops"], flops / (t * 1e-6) / 1e12, DERIVED_TOL, 1e-9):
        out.append(f"tflops {row['tflops']:.4g} is not flops / time ({flops / (t * 1e-6) / 1e12:.4g})")
    if not _near(row["dram_gbps"], (rd + wr) / (t * 1e-6) / 1e9, DERIVED_TOL, 1e-9):
        out.append(f"dram_gbps {row['dram_gbps']:.4g} is not DRAM bytes / time ({(rd + wr) / (t * 1e-6) / 1e9:.4g})")
    for n in ("dram_read_bytes", "dram_write_bytes", "l2_read_bytes", "flops"):
        s = sum(k[n] for k in krows)
        if krows and not _near(row[n], s, 1e-6, len(krows)):
            out.append(f"{n} {row[n]:.6g} is not the sum over its launches ({s:.6g})")
    if not (_num(row.get("l2_hit_rate")) and 0 <= row["l2_hit_rate"] <= 1):
        out.append(f"l2_hit_rate {_brief(row.get('l2_hit_rate'))} is not a fraction")
    err = row.get("max_rel_err")
    if err not in ("", None):
        try:
            want = check_status(params or {}, float(err))[0]
        except (TypeError, ValueError):
            want = None
        if want != status:
            out.append(f"status {status} does not follow from max_rel_err {_brief(err)} (the exact check says {want})")
    if cfg is not None:
        if _num(row.get("clock_mhz")) and row["clock_mhz"] > cfg.clock_hz / 1e6 + 0.5:
            out.append(f"clock {row['clock_mhz']} MHz is above the maximum {cfg.clock_hz / 1e6:.0f} MHz")
        dtype = (params or {}).get("dtype", "fp16")
        tensor = cfg.tensor_flops_per_s.get(dtype, max(cfg.tensor_flops_per_s.values()))
        peak = tensor if row["tensor_flops"] > 0 else cfg.fp32_flops_per_s
        out += _bound_problems(t, flops, peak)
        u = (rd + wr) / (t * 1e-6 * cfg.hbm_read_bandwidth_bytes_per_s)
        if u > 1 + UTIL_TOL:
            out.append(f"dram utilisation {u:.3g} is above 1")
        out += _throttle_problems([(k.get("launch"), k["clock_mhz"] * 1e6 if _num(k.get("clock_mhz")) else None,
                                    k.get("power_w") if _num(k.get("power_w")) else None) for k in krows], cfg)
    if workload is not None:
        out += _compulsory_problems(rd, wr, compulsory_bytes(workload))
    return out


def _brief(x, n: int = 40) -> str:
    """A short repr of a saved value (a tampered file may hold anything, of any length)."""
    s = repr(x)
    return s if len(s) <= n else s[:n - 3] + "..."


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
