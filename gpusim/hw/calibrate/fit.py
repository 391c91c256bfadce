"""The pure half of calibration: measured numbers -> GPUConfig fields, without a GPU.

Owns the statistics of repeated measurements (``stats``), the arithmetic turning timings into
config numbers (``launch_overheads``, ``launch_costs``, ``latency_cycles``, ``l2_falloff``,
``tile_efficiencies``, ``clock_from_device``), the pointer-chase layout (``cyclic_chase``),
``build_config`` (the base config with every measured field replaced, invalid ones rejected),
``write_config``, the run's ``provenance`` and the comparison table printed at the end.
"""
from __future__ import annotations

import json
import math
import os
import socket
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from ...hardware import GPUConfig, Measurement
from .plan import MIB

INT_FIELDS = {"sm_count", "sram_bytes_per_sm", "sram_bytes_per_cta_max", "registers_per_sm", "max_registers_per_thread",
              "max_ctas_per_sm", "max_warps_per_sm", "l2_bytes", "l2_line_bytes", "l2_ways", "hbm_bytes"}


def stats(samples) -> dict:
    """median / min / max / relative spread ((max - min) / median) of a list of numbers."""
    xs = [float(x) for x in samples if x is not None and math.isfinite(float(x))]
    if not xs:
        return {"value": None, "min": None, "max": None, "spread": None, "n": 0, "samples": []}
    med = float(np.median(xs))
    return {"value": med, "min": min(xs), "max": max(xs), "spread": (max(xs) - min(xs)) / med if med else None,
            "n": len(xs), "samples": xs}


def launch_overheads(t1_us: float, t10_us: float) -> tuple:
    """(launch_overhead_us, sync_overhead_us) from one launch timed alone and ten back to back:
    each extra launch costs (t10 - t1) / 9; what one launch costs beyond that is the sync."""
    launch = max(0.0, (t10_us - t1_us) / 9.0)
    return launch, max(0.0, t1_us - launch)


def launch_costs(ks, medians_us) -> tuple:
    """(per-launch, fixed) microseconds from the times of k back-to-back launches. Only while the
    host enqueues faster than the GPU runs is the slope the GPU-side cost; a host that falls behind
    only adds time, so the smallest increment over one launch is the estimate."""
    t = dict(zip(ks, medians_us))
    k1 = min(ks)
    per = min((t[k] - t[k1]) / (k - k1) for k in ks if k > k1)
    per = max(0.0, float(per))
    return per, max(0.0, float(t[k1] - per))


def latency_cycles(t_short_s: float, t_long_s: float, hops_short: int, hops_long: int, clock_hz: float) -> float:
    """Cycles per dependent load from two pointer-chasing runs (the difference cancels the launch
    and the first cold traversal)."""
    if hops_long <= hops_short:
        raise ValueError("hops_long must exceed hops_short")
    return (t_long_s - t_short_s) / (hops_long - hops_short) * clock_hz


def l2_falloff(curve, plateau_max_bytes: int = 16 * MIB, hbm_bytes_per_s: float | None = None,
               plateau_min_bytes: int = 0) -> dict:
    """Plateau and fall-off of a bandwidth-vs-working-set curve [(W bytes, bytes/s), ...].

    plateau = median bandwidth over plateau_min_bytes < W <= plateau_max_bytes (the calibrator
    skips the smallest sets, which partly hit L1 and the SM's near L2 partition); floor =
    ``hbm_bytes_per_s`` or the bandwidth at the largest W; the fall-off is the first W beyond the
    plateau (log-interpolated from the last point still above it) where bandwidth drops below
    (plateau + floor) / 2. None if it never does."""
    pts = sorted((float(w), float(b)) for w, b in curve if b is not None and math.isfinite(b) and b > 0)
    if not pts:
        return {"plateau": None, "floor": None, "threshold": None, "falloff_bytes": None}
    small = [b for w, b in pts if plateau_min_bytes < w <= plateau_max_bytes] or [pts[0][1]]
    plateau = float(np.median(small))
    floor = float(hbm_bytes_per_s) if hbm_bytes_per_s else pts[-1][1]
    thr = (plateau + floor) / 2.0
    fall = None
    prev = None
    for w, b in pts:
        if w > plateau_max_bytes and b < thr:
            if prev is None or prev[1] <= b or prev[1] < thr:
                fall = w
            else:
                (w0, b0) = prev
                f = (b0 - thr) / (b0 - b)
                fall = 2.0 ** (math.log2(w0) + f * (math.log2(w) - math.log2(w0)))
            break
        prev = (w, b)
    return {"plateau": plateau, "floor": floor, "threshold": thr, "falloff_bytes": fall}


def cyclic_chase(nodes: int, stride: int, seed: int = 0) -> tuple:
    """(positions, next positions) of one random cycle through ``nodes`` slots ``stride`` elements
    apart: starting anywhere, following next visits every node once before returning."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(nodes).astype(np.int64)
    pos = order * stride
    return pos, np.roll(pos, -1)


def tile_efficiencies(tiles: list, peak_flops_per_s: float) -> list:
    """[{m, n, k, num_warps, efficiency}] for the fp16 tiles measured, relative to the peak.

    Every tile ran one CTA per SM, so the per-SM rate ratio equals the whole-GPU ratio."""
    out = []
    for t in tiles:
        f = t.get("flops_per_s")
        if t.get("dtype", "fp16") != "fp16" or not f or not peak_flops_per_s:
            continue
        eff = min(1.5, f / peak_flops_per_s)
        if eff > 0:
            out.append({"m": t["m"], "n": t["n"], "k": t["k"], "num_warps": t["num_warps"],
                        "efficiency": round(eff, 4)})
    return out


def _method_text(r: dict) -> str:
    s = f"measured: {r.get('method', '')}"
    if r.get("n", 0) > 1 and r.get("spread") is not None:
        s += f" (median of {r['n']}, spread {100 * r['spread']:.1f}%: {r['min']:.4g}..{r['max']:.4g})"
    return s


def _set_tile_efficiency(data: dict, sources: dict, rejected: dict, raw: dict) -> None:
    """``tensor_tile_efficiency`` from the measured fp16 tiles, relative to the best (kept from the base
    config when nothing was measured or the list does not validate)."""
    peak = (raw.get("fields") or {}).get("tensor_flops_per_s.fp16", {}).get("value")
    effs = tile_efficiencies(raw.get("tiles") or [], peak) if peak else []
    if not effs:
        return
    trial = json.loads(json.dumps(data))
    trial["tensor_tile_efficiency"] = effs
    try:
        GPUConfig.model_validate(trial)
        data["tensor_tile_efficiency"] = effs
        sources["tensor_tile_efficiency"] = (
            f"measured: per-SM dot rate of each tile shape (one CTA per SM, acc = tl.dot(a, b, acc) repeated) "
            f"/ the best fp16 tile's rate; {len(effs)} shapes")
    except Exception as e:  # keep the base list
        rejected["tensor_tile_efficiency"] = str(e).splitlines()[0]


def _tile_and_other_measurements(raw: dict) -> list:
    """Config measurements (not fields) of every tile's FLOP/s and of the raw ``measurements`` list."""
    out = []
    for t in raw.get("tiles") or []:
        if t.get("flops_per_s"):
            out.append(Measurement(
                field=f"tile_flops_per_s[{t.get('dtype', 'fp16')} m={t['m']} n={t['n']} k={t['k']} w={t['num_warps']}]",
                value=float(t["flops_per_s"]), spread=t.get("spread"),
                method=f"{t.get('method', 'tile dot loop')}; R={t.get('repeats')}").model_dump())
    for m in raw.get("measurements") or []:
        if m.get("value") is not None and math.isfinite(float(m["value"])):
            out.append(Measurement(field=m["field"], value=float(m["value"]), spread=m.get("spread"),
                                   method=m.get("method", "")).model_dump())
    return out


def build_config(base: GPUConfig, raw: dict, name: str) -> tuple:
    """The base config with every measured field of ``raw`` replaced. Returns (config, rejected)
    where rejected maps a field to why its measured value was not used (the base value stays)."""
    data = base.model_dump()
    prov = {str(k): str(v) for k, v in (raw.get("provenance") or {}).items()}
    dev = prov.get("device_name", "GPU")
    data["name"] = name
    data["description"] = (f"{dev} measured by gpusim calibrate{' --quick' if raw.get('quick') else ''} on "
                           f"{prov.get('date', '?')}; fields not measured are from {base.name}")
    sources = {k: f"{base.name}: {v}" for k, v in data.get("sources", {}).items()}
    measurements: list = []
    rejected: dict = {}
    measured_parents: set = set()

    def try_set(key, value, source):
        trial = json.loads(json.dumps(data))
        if "." in key:
            parent, sub = key.split(".", 1)
            trial[parent] = dict(trial[parent])
            trial[parent][sub] = value
        else:
            trial[key] = int(round(value)) if key in INT_FIELDS else value
        try:
            GPUConfig.model_validate(trial)
        except Exception as e:  # pydantic.ValidationError: keep the base value
            errs = getattr(e, "errors", lambda: [])()
            rejected[key] = errs[0]["msg"] if errs else str(e)
            return False
        data.clear()
        data.update(trial)
        parent = key.split(".", 1)[0]
        if "." in key:
            part = f"{key.split('.', 1)[1]}: {source}"
            sources[parent] = f"{sources[parent]}; {part}" if parent in measured_parents else part
            measured_parents.add(parent)
        else:
            sources[parent] = source
        return True

    for key, r in (raw.get("fields") or {}).items():
        v = r.get("value")
        if v is None or not math.isfinite(float(v)):
            rejected[key] = r.get("error", "no value")
            continue
        if key.split(".", 1)[0] not in GPUConfig.model_fields:
            rejected[key] = "not a GPUConfig field"
            continue
        if try_set(key, float(v), _method_text(r)):
            measurements.append(Measurement(field=key, value=float(v), spread=r.get("spread"),
                                            method=r.get("method", "")).model_dump())

    _set_tile_efficiency(data, sources, rejected, raw)
    measurements += _tile_and_other_measurements(raw)
    data["sources"] = sources
    data["measurements"] = measurements
    data["provenance"] = prov
    return GPUConfig.model_validate(data), rejected


def write_config(cfg: GPUConfig, path: Path, header: str = "") -> None:
    """``cfg`` as YAML at ``path`` (written atomically), ``header`` as comment lines on top."""
    text = yaml.safe_dump(cfg.model_dump(), sort_keys=False, width=120, allow_unicode=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(f"# {line}\n" for line in header.splitlines()) + text)
    os.replace(tmp, path)


def clock_from_device(dev: dict) -> tuple:
    """(max SM clock in Hz, where it came from) of a device description, or (None, "") when the
    driver reports none: nvidia-smi clocks.max.sm, else Triton's sm_clock_rate (kHz), else torch's
    clock_rate (kHz)."""
    smi = dev.get("nvidia_smi") or {}
    if smi.get("clocks.max.sm"):
        try:
            return float(smi["clocks.max.sm"]) * 1e6, "nvidia-smi clocks.max.sm"
        except ValueError:
            pass
    if (dev.get("triton") or {}).get("sm_clock_rate"):
        return float(dev["triton"]["sm_clock_rate"]) * 1e3, "Triton device properties sm_clock_rate"
    if dev.get("clock_rate"):
        return float(dev["clock_rate"]) * 1e3, "torch device properties clock_rate"
    return None, ""


def provenance(dev: dict) -> dict:
    """Where and with what a calibration ran: device, date, host, driver, torch/CUDA/Triton/gpusim versions."""
    out = {"device_name": str(dev.get("name", "?")), "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "hostname": socket.gethostname(), "python": sys.version.split()[0]}
    smi = dev.get("nvidia_smi") or {}
    out["driver_version"] = str(smi.get("driver_version", "?"))
    try:
        import torch

        out["torch_version"] = torch.__version__
        out["cuda_version"] = str(torch.version.cuda)
    except Exception:
        pass
    try:
        import triton

        out["triton_version"] = triton.__version__
    except Exception:
        pass
    from ... import __version__

    out["gpusim_version"] = __version__
    return out


def format_table(base: GPUConfig, cfg: GPUConfig, raw: dict, rejected: dict) -> str:
    """Each measured field against the base config's value (ratio, spread, why it was rejected)."""
    rows = []
    for key, r in (raw.get("fields") or {}).items():
        if "." in key:
            parent, sub = key.split(".", 1)
            b = getattr(base, parent).get(sub)
        else:
            b = getattr(base, key, None)
        used = key not in rejected
        v = r.get("value")
        ratio = f"{float(v) / float(b):.3f}" if v is not None and b else ""
        spread = f"{100 * r['spread']:.1f}%" if r.get("spread") is not None and r.get("n", 0) > 1 else ""
        rows.append((key, f"{float(b):.4g}" if b is not None else "", f"{float(v):.4g}" if v is not None else "FAILED",
                     ratio, spread, "" if used else f"kept base: {rejected[key]}"))
    hdr = ("field", base.name, cfg.name, "ratio", "spread", "note")
    w = [max(len(str(x[i])) for x in rows + [hdr]) for i in range(len(hdr))]
    lines = ["  ".join(str(h).ljust(wi) for h, wi in zip(hdr, w)), "  ".join("-" * wi for wi in w)]
    lines += ["  ".join(str(c).ljust(wi) for c, wi in zip(row, w)) for row in rows]
    lines.append(f"tensor_tile_efficiency: {len(cfg.tensor_tile_efficiency)} shapes")
    f = raw.get("l2_curve") or {}
    if f.get("falloff_bytes"):
        lines.append(f"L2 working-set fall-off: {f['falloff_bytes'] / MIB:.1f} MiB (l2_bytes {cfg.l2_bytes / MIB:.1f} MiB)")
    for k, v in (raw.get("errors") or {}).items():
        lines.append(f"error: {k}: {v}")
    return "\n".join(lines)
