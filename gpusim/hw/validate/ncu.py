"""DRAM counters from Nsight Compute: one ``ncu`` process per batch of points.

Owns the ncu command line (``--clock-control none``, the three metrics, CSV in base units), which
points get profiled (``select_ncu_points``), parsing ncu's CSV, mapping the profiled kernels back to
points and launches (``assign_ncu``), the batch loop (``run_ncu``), and the profiled child's body
(``ncu_points_entry``, run as ``python -m gpusim validate --ncu-points FILE``): each point's
launches once, with one status line per point on stderr.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ...backends import numpy_exec
from ...kernels import build
from . import user_kernels
from .common import error_text, log
from .measure import SEEDS, free_gpu_memory

NCU_METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum")
NCU_MAX_DEFAULT = 24
NCU_BATCH = 8
POINT_TAG = "GPUSIM_NCU_POINT "


def ncu_command(ncu: str, spec_path) -> list:
    """ncu profiling ``python -m gpusim validate --ncu-points SPEC`` (the points of one batch)."""
    return [ncu, "--clock-control", "none", "--metrics", ",".join(NCU_METRICS), "--csv", "--print-units", "base",
            sys.executable, "-m", "gpusim", "validate", "--ncu-points", str(spec_path)]


_UNIT = {"byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12, "b": 1.0, "kb": 1e3, "mb": 1e6,
         "gb": 1e9, "": 1.0}


def _number(text: str):
    t = str(text).replace(",", "").replace(" ", "")
    try:
        return float(t)
    except ValueError:
        return None


def parse_ncu_csv(text: str) -> list:
    """Kernels in profiling order from ``ncu --csv`` output (other lines ignored):
    ``[{"id", "kernel", "metrics": {metric: value in base units}}]``."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    rows = list(csv.reader(lines))
    header = next((r for r in rows if "Metric Name" in r and "Kernel Name" in r and "Metric Value" in r), None)
    if header is None:
        return []
    h = {name: i for i, name in enumerate(header)}
    found: dict = {}
    for r in rows:
        if len(r) != len(header) or r == header:
            continue
        kid = r[h["ID"]] if "ID" in h else str(len(found))
        name = r[h["Kernel Name"]].split("(")[0].strip()
        entry = found.setdefault(kid, {"id": kid, "kernel": name, "metrics": {}})
        val = _number(r[h["Metric Value"]])
        unit = r[h["Metric Unit"]].strip().lower() if "Metric Unit" in h else ""
        if val is not None:
            val *= _UNIT.get(unit, 1.0)
        entry["metrics"][r[h["Metric Name"]]] = val
    return sorted(found.values(), key=lambda e: (int(e["id"]) if str(e["id"]).isdigit() else 0))


def assign_ncu(kernels: list, expected: list, statuses: dict) -> dict:
    """Map profiled kernels to points: ``expected`` is [(point index, [kernel names of its
    launches in order])] in the order the points ran; ``statuses`` {index: {"status", "launched"}}
    from the profiled process. Kernels whose names are not expected (PyTorch fills) are ignored.
    Returns {index: {"launches": [...]} or {"error": ...}}."""
    names = {n for _, ns in expected for n in ns}
    seq = [k for k in kernels if k["kernel"] in names]
    out, pos, broken = {}, 0, None
    for idx, ks in expected:
        st = statuses.get(idx, {})
        if broken:
            out[idx] = {"error": broken}
            continue
        if st.get("status") != "ok":
            out[idx] = {"error": f"point failed under ncu: {st.get('reason', 'no status line')}"}
            n = st.get("launched")
            if n is None:
                broken = "kernel order unknown after a failed point"
            pos += n or 0
            continue
        chunk = seq[pos:pos + len(ks)]
        got = [c["kernel"] for c in chunk]
        if got != list(ks):
            out[idx] = {"error": f"kernel sequence mismatch: expected {list(ks)}, profiled {got}"}
            broken = "kernel order lost after a mismatch"
            continue
        out[idx] = {"launches": [{"kernel": c["kernel"],
                                  "dram_read_bytes": c["metrics"].get("dram__bytes_read.sum"),
                                  "dram_write_bytes": c["metrics"].get("dram__bytes_write.sum"),
                                  "l2_bytes": c["metrics"].get("lts__t_bytes.sum")} for c in chunk]}
        pos += len(ks)
    return out


def expected_kernels(kernel: str, params: dict) -> list:
    from ...toolchain.lower import kernel_name

    wl = build(kernel, params)
    nl = user_kernels.native_launch(wl)
    return [nl.kernel_name] if nl is not None else [kernel_name(l.program) for l in wl.launches]


def _ncu_fatal(text: str) -> bool:
    keys = ("ERR_NVGPUCTRPERM", "LibraryNotLoaded", "Failed to initialize the profiler", "not supported on this")
    return any(k in text for k in keys)


def select_ncu_points(records: list, ncu_max: int) -> tuple:
    """(indices to profile, indices skipped by the cap): evenly spaced over the measured points."""
    ok = [r["index"] for r in records if r.get("status") == "ok" and r.get("measured")]
    if len(ok) <= ncu_max:
        return ok, []
    pick = sorted({ok[int(round(i))] for i in np.linspace(0, len(ok) - 1, max(1, ncu_max))})
    return pick, [i for i in ok if i not in pick]


def _run_profiler(cmd: list, timeout: float, env: dict) -> tuple:
    """(stdout, stderr, return code or "timeout") of one ncu process."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        return p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        text = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        errtext = (e.stderr or b"").decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return text, errtext, "timeout"


def _point_statuses(text: str) -> dict:
    """{index: status line} of the points the profiled process reported."""
    statuses = {}
    for ln in text.splitlines():
        if POINT_TAG in ln:
            try:
                st = json.loads(ln.split(POINT_TAG, 1)[1])
                statuses[st["index"]] = st
            except (ValueError, KeyError):
                pass
    return statuses


def _assign_batch(chunk: list, by_index: dict, text: str, errtext: str, rc) -> list:
    """Fill record["ncu"] of the points of one batch from its output; returns the kernels profiled."""
    statuses = _point_statuses(text + "\n" + errtext)
    kernels = parse_ncu_csv(text)
    expected = []
    for i in chunk:
        try:
            expected.append((i, expected_kernels(by_index[i]["kernel"], by_index[i]["params"])))
        except Exception as e:
            by_index[i]["ncu"] = {"error": f"cannot name kernels: {error_text(e)}"}
    assigned = assign_ncu(kernels, expected, statuses)
    tail = " | ".join((errtext or text).strip().splitlines()[-3:])[-400:]
    for i, _ in expected:
        res = assigned.get(i, {"error": "no result"})
        if "error" in res and not kernels:
            res = {"error": f"ncu returned {rc} with no kernels: {tail}"}
        by_index[i]["ncu"] = res
    return kernels


def _child_env() -> dict:
    """This environment with the folder holding the gpusim package first on PYTHONPATH."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_ncu(records: list, selected: list, out_dir: Path, deadline: float | None = None) -> dict:
    """Profile the selected points in batches; fills record["ncu"]; returns meta for the report."""
    ncu = shutil.which("ncu")
    meta = {"ncu": ncu, "metrics": list(NCU_METRICS), "batches": [], "disabled": None}
    if not ncu:
        meta["disabled"] = "ncu not on PATH"
        return meta
    by_index = {r["index"]: r for r in records}
    raw_dir = out_dir / "ncu_raw"
    raw_dir.mkdir(exist_ok=True)
    env = _child_env()
    for b in range(0, len(selected), NCU_BATCH):
        chunk = selected[b:b + NCU_BATCH]
        if meta["disabled"]:
            for i in chunk:
                by_index[i]["ncu"] = {"error": f"not profiled: {meta['disabled']}"}
            continue
        left = None if deadline is None else deadline - time.time()
        if left is not None and left < 30:
            meta["disabled"] = "time budget (GPUSIM_DEADLINE) reached"
            for i in chunk:
                by_index[i]["ncu"] = {"error": "not profiled: time budget"}
            continue
        timeout = 90 + 45 * len(chunk)
        if left is not None:
            timeout = min(timeout, left - 15)
        spec = {"points": [{"index": i, "kernel": by_index[i]["kernel"], "params": by_index[i]["params"],
                            "seed": SEEDS[0]} for i in chunk]}
        spec_path = raw_dir / f"batch{b // NCU_BATCH:02d}.json"
        spec_path.write_text(json.dumps(spec))
        log(f"ncu: profiling points {chunk} ({len(chunk)} points, timeout {timeout:.0f}s)")
        t0 = time.time()
        text, errtext, rc = _run_profiler(ncu_command(ncu, spec_path), timeout, env)
        (raw_dir / f"batch{b // NCU_BATCH:02d}.csv").write_text(text)
        (raw_dir / f"batch{b // NCU_BATCH:02d}.log").write_text(errtext[-200000:])
        kernels = _assign_batch(chunk, by_index, text, errtext, rc)
        meta["batches"].append({"points": chunk, "rc": rc, "seconds": round(time.time() - t0, 1),
                                "kernels_profiled": len(kernels)})
        log(f"ncu: rc={rc}, {len(kernels)} kernels profiled in {time.time() - t0:.0f}s")
        if not kernels:
            tail = " | ".join((errtext or text).strip().splitlines()[-3:])[-400:]
            meta["disabled"] = f"ncu failed{' (profiler unavailable)' if _ncu_fatal(text + errtext) else ''}: {tail}"
    return meta


def ncu_points_entry(spec_arg: str) -> int:
    """Body of ``python -m gpusim validate --ncu-points FILE|JSON``: run each point's launches once
    (under ncu) and print one status line per point."""
    text = spec_arg if spec_arg.lstrip().startswith(("{", "[")) else Path(spec_arg).read_text()
    spec = json.loads(text)
    points = spec["points"] if isinstance(spec, dict) and "points" in spec else (
        spec if isinstance(spec, list) else [spec])
    device = spec.get("device", "cuda") if isinstance(spec, dict) else "cuda"
    from ...backends.triton import run as tb
    from ...toolchain.lower import kernel_name

    for i, pt in enumerate(points):
        idx = pt.get("index", i)
        st = {"index": idx, "status": "ok", "launched": 0, "kernels": []}
        try:
            wl = build(pt["kernel"], pt["params"])
            # byte counts do not depend on the values: plain random normals, never a kernel's own
            # generator (attention_flash_bwd's runs a float64 forward in torch, which ncu would profile)
            inputs = numpy_exec.random_normal_inputs(wl, pt.get("seed", SEEDS[0]))
            nl = user_kernels.native_launch(wl)      # a user's Triton kernel runs as written
            if nl is not None:
                mem = user_kernels.allocate(nl, inputs, device)
                runs = user_kernels.launchers(wl, mem)
            else:
                mem = tb.allocate(wl, inputs, device)
                runs = [(kernel_name(la.program), go) for la, (_, go) in zip(wl.launches, tb.launchers(wl, mem))]
            for name, go in runs:
                go()
                st["launched"] += 1
                st["kernels"].append(name)
            if device.startswith("cuda"):
                import torch

                torch.cuda.synchronize()
            del mem
        except Exception as e:
            st.update(status="error", reason=error_text(e))
        print(POINT_TAG + json.dumps(st), file=sys.stderr, flush=True)
        free_gpu_memory()
    return 0
