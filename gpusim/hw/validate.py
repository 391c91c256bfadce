"""``gpusim validate``: run a scenario's points on the real GPU and in the simulator, and compare.

This module owns the validation loop and its report. Two halves, kept apart:

* measuring (needs a CUDA GPU): ``run_validation`` builds every point, runs it through the
  Triton backend on random normal inputs (outputs poisoned with NaN), checks the outputs
  against a float64 reference (``sampled_reference``: everything for small problems, a sample of
  rows for large ones), times it with ``time_workload`` (do_bench medians, L2 cleared) on two
  input sets, optionally reads DRAM bytes per launch from Nsight Compute (one ``ncu`` process
  per batch of points, running ``python -m gpusim.validate --ncu-points FILE``) and times the
  PyTorch eager/SDPA-flash attention references. The simulator predicts each point (with the
  ``--gpu`` config) in worker processes meanwhile. Everything is saved in ``validation.json``
  after every point.
* analysing (CPU only): ``build_rows`` (records -> CSV rows), ``analyze(rows) -> summary``,
  ``write_report(DIR, rows, summary)`` and ``resimulate(validation.json, gpu_config) -> rows``
  work from saved files, so recorded points can be re-predicted with a new config later:
  ``python -m gpusim.validate --reanalyze DIR [--gpu CONFIG] [--out DIR2]``.

Status of a point: ok, wrong-result (outputs off; not timed), gpu-error (build, compile or run
failed on the GPU), sim-infeasible / sim-error (measured, not predicted), infeasible (both the
simulator and the GPU refuse it: agreement), skipped (the GPUSIM_DEADLINE time budget ran out).
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from ..backends import numpy_exec
from ..hardware import GPUConfig, load_gpu
from ..kernels import ALL_PARAM_NAMES, build

TOL = {"fp16": 5e-3, "bf16": 2e-2, "fp32": 1e-2}        # max_rel_err allowed, by storage dtype
TILE_PARAMS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "BLOCK", "num_stages", "num_warps")
BIG_ATTENTION = 1 << 28          # batch*heads*N^2 above which attention is checked on sampled rows
BIG_MATMUL = 1 << 30             # M*N*K above which matmul is checked on sampled rows
SAMPLE_ROWS = 64
NCU_METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum")
NCU_MAX_DEFAULT = 24
NCU_BATCH = 8
SEEDS = (1, 2)
POINT_TAG = "GPUSIM_NCU_POINT "
BASE_COLUMNS = ("point", "scope", "launch", "kernel", "gpu")
METRIC_COLUMNS = ("group", "measured_us", "measured_spread_pct", "predicted_us", "error_pct",
                  "measured_dram_read_bytes", "measured_dram_write_bytes", "predicted_dram_read_bytes",
                  "predicted_dram_write_bytes", "dram_error_pct", "measured_l2_bytes", "predicted_l2_bytes",
                  "reference_eager_us", "reference_sdpa_us", "max_rel_err", "status", "reason")
NUMERIC_COLUMNS = {c for c in METRIC_COLUMNS if c not in ("group", "status", "reason")} | {"point"}


def _log(msg: str) -> None:
    print(f"[validate {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _err(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}".strip().splitlines()[0][:400]


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def group_key(kernel: str, params: dict) -> str:
    """Points with the same key differ only in tile parameters (a tile sweep group)."""
    rest = ",".join(f"{k}={params[k]}" for k in sorted(params) if k not in TILE_PARAMS)
    return f"{kernel}: {rest}"


def tile_label(params: dict) -> str:
    return " ".join(f"{k}={params[k]}" for k in TILE_PARAMS if params.get(k) not in (None, ""))


def tolerance(params: dict) -> float:
    return TOL.get(params.get("dtype", "fp16"), 1e-2)


# --------------------------------------------------------------------------- correctness
def _attention_rows(q, k, v, rows, causal: bool) -> np.ndarray:
    """float64 softmax(q[rows] k^T / sqrt(d)) v for one batch*head, causal mask on absolute rows."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    s = q[rows] @ k.T / math.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.arange(k.shape[0])[None, :] <= np.asarray(rows)[:, None], s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return (e / e.sum(axis=-1, keepdims=True)) @ v


def sampled_reference(workload, inputs: dict, rows: int = SAMPLE_ROWS, seed: int = 0,
                      force_sample: bool = False) -> tuple:
    """float64 references of the outputs: ``({name: (index, ref)}, "full" | "sampled")``.

    ``out[index]`` is what ``ref`` must match. Small problems: ``numpy_exec.reference`` of the
    whole output (index ``...``). Large attention: the first and last batch*head and ``rows``
    random query rows; large matmul: ``rows`` random rows of C. Elementwise is always full."""
    kind = workload.name
    rng = np.random.default_rng(seed)
    if kind.startswith("attention"):
        q, k, v = inputs["q"], inputs["k"], inputs["v"]
        bh, n, d = q.shape
        if force_sample or bh * n * n > BIG_ATTENTION:
            heads = sorted({0, bh - 1})
            r = np.sort(rng.choice(n, size=min(rows, n), replace=False))
            causal = bool(workload.params.get("causal"))
            ref = np.stack([_attention_rows(q[h], k[h], v[h], r, causal) for h in heads])
            return {"o": (np.ix_(heads, r, np.arange(d)), ref)}, "sampled"
    elif kind == "matmul":
        a, b = inputs["a"], inputs["b"]
        m, kk = a.shape
        n = b.shape[1]
        if force_sample or m * n * kk > BIG_MATMUL:
            r = np.sort(rng.choice(m, size=min(rows, m), replace=False))
            ref = np.asarray(a[r], dtype=np.float64) @ np.asarray(b, dtype=np.float64)
            return {"c": (np.ix_(r, np.arange(n)), ref)}, "sampled"
    full = numpy_exec.reference(workload, inputs)
    return {name: (Ellipsis, full[name]) for name in workload.outputs}, "full"


def check_outputs(workload, outputs: dict, inputs: dict, seed: int = 0) -> tuple:
    """(worst max_rel_err over the outputs, "full" | "sampled")."""
    refs, how = sampled_reference(workload, inputs, seed=seed)
    err = 0.0
    for name, (idx, ref) in refs.items():
        err = max(err, numpy_exec.max_rel_err(np.asarray(outputs[name])[idx], ref))
    return err, how


# --------------------------------------------------------------------------- simulation
def simulate_point(kernel: str, params: dict, cfg, fidelity: str = "fast") -> dict:
    """Prediction of one point as plain data (runs in worker processes; never raises)."""
    from ..api import simulate

    t0 = time.time()
    try:
        cfg = cfg if isinstance(cfg, GPUConfig) else GPUConfig.model_validate(cfg)
        r = simulate(kernel, cfg, check=False, fidelity=fidelity, **params)
    except Exception as e:  # recorded as sim-error; the measurement still counts
        return {"status": "error", "reason": _err(e), "sim_seconds": round(time.time() - t0, 2)}
    if r.status != "ok":
        return {"status": r.status, "reason": r.reason, "sim_seconds": round(time.time() - t0, 2)}
    # per-launch numbers are measured one launch at a time (do_bench clears the L2 first and the
    # timed region adds its fixed cost; ncu flushes caches before each kernel): predict them the
    # same way, each launch alone on a cold L2, when the workload has several launches
    alone = list(r.kernels)
    if len(r.kernels) > 1:
        import dataclasses

        from ..api import simulate_workload
        from ..kernels import build

        w = build(kernel, params)
        alone = [simulate_workload(dataclasses.replace(w, launches=(lc,)), cfg, check=False, fidelity=fidelity)
                 for lc in w.launches]
        alone = [(a.kernels[0], a.time_us) for a in alone]
    else:
        alone = [(r.kernels[0], r.time_us)]
    return {"status": "ok", "reason": "", "total_us": r.time_us, "dram_read_bytes": r.dram_read_bytes,
            "dram_write_bytes": r.dram_write_bytes, "l2_read_bytes": r.l2_read_bytes,
            "launches": [{"launch": k.launch, "time_us": t, "dram_read_bytes": k.dram_read_bytes,
                          "dram_write_bytes": k.dram_write_bytes, "l2_read_bytes": k.l2_read_bytes,
                          "l2_hit_rate": k.l2_hit_rate, "ctas_per_sm": k.ctas_per_sm,
                          "occupancy_limiter": k.occupancy_limiter, "waves": k.waves} for k, t in alone],
            "sim_seconds": round(time.time() - t0, 2)}


# --------------------------------------------------------------------------- the GPU side
class TritonCudaBackend:
    """Runs and times workloads through ``gpusim.backends.triton`` on cuda:0."""

    name = "triton-cuda"

    def __init__(self):
        self._reference_cache: dict = {}

    def run(self, workload, inputs: dict) -> dict:
        from ..backends.triton import run as tb

        return tb.run_workload(workload, inputs, device="cuda")

    def time(self, workload, inputs: dict) -> dict:
        from ..backends.triton import run as tb

        return tb.time_workload(workload, inputs)

    def torch_attention(self, params: dict) -> dict:
        key = tuple(params.get(k) for k in ("batch", "heads", "seq_len", "head_dim", "dtype", "causal"))
        if key not in self._reference_cache:
            self._reference_cache[key] = torch_attention_times(params)
        return dict(self._reference_cache[key])

    def environment(self) -> dict:
        env = {"backend": self.name}
        try:
            import torch
            import triton

            env.update(torch=torch.__version__, triton=triton.__version__, cuda=str(torch.version.cuda),
                       device=torch.cuda.get_device_name(0))
        except Exception as e:
            env["error"] = _err(e)
        return env


def _bench_us(fn, n: int = 2) -> tuple:
    """(median, spread %) of n do_bench medians, in microseconds."""
    from triton.testing import do_bench

    ts = [1000.0 * float(do_bench(fn, warmup=25, rep=100, return_mode="median")) for _ in range(n)]
    med = float(np.median(ts))
    return med, (max(ts) - min(ts)) / med * 100.0 if med else None


def torch_attention_times(params: dict) -> dict:
    """do_bench medians of PyTorch eager attention (softmax(q k^T * scale) v) and of
    scaled_dot_product_attention restricted to the flash backend, same shapes and dtype."""
    import torch

    b, h, n, d = params["batch"], params["heads"], params["seq_len"], params["head_dim"]
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[params.get("dtype", "fp16")]
    causal = bool(params.get("causal"))
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=dt) for _ in range(3))
    scale = 1.0 / math.sqrt(d)
    out = {}
    try:
        mask = torch.ones(n, n, dtype=torch.bool, device="cuda").tril() if causal else None

        def eager():
            s = (q @ k.transpose(-1, -2)) * scale
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            return torch.softmax(s, dim=-1) @ v

        eager()
        out["eager_us"], out["eager_spread_pct"] = _bench_us(eager)
    except Exception as e:  # e.g. out of memory at long sequences
        out["eager_error"] = _err(e)
    torch.cuda.empty_cache()
    try:
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            out["sdpa_us"], out["sdpa_spread_pct"] = _bench_us(
                lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
    except Exception as e:  # e.g. fp32 has no flash kernel
        out["sdpa_error"] = _err(e)
    return out


def _free_gpu_memory():
    import gc

    gc.collect()
    if "torch" in sys.modules:
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except Exception:
            pass


def measure_point(kernel: str, params: dict, backend, seeds=SEEDS, reference: bool = False) -> dict:
    """Correctness check, then timing on each input set; never raises."""
    rec = {"status": "ok", "reason": "", "max_rel_err": None, "tolerance": tolerance(params), "check": None,
           "measured": None, "reference": None, "timings_s": {}}
    t0 = time.time()
    try:
        wl = build(kernel, params)
        inputs = numpy_exec.random_inputs(wl, seeds[0])
    except Exception as e:
        rec.update(status="gpu-error", reason=f"build: {_err(e)}")
        return rec
    try:
        outs = backend.run(wl, inputs)
    except Exception as e:
        rec.update(status="gpu-error", reason=f"run: {_err(e)}")
        _free_gpu_memory()
        return rec
    rec["timings_s"]["run"] = round(time.time() - t0, 2)
    t1 = time.time()
    try:
        err, how = check_outputs(wl, outs, inputs)
    except Exception as e:
        rec.update(status="gpu-error", reason=f"reference: {_err(e)}")
        return rec
    finally:
        del outs
        _free_gpu_memory()
    rec["timings_s"]["check"] = round(time.time() - t1, 2)
    rec.update(max_rel_err=err, check=how)
    if not err <= rec["tolerance"]:
        rec.update(status="wrong-result", reason=f"max_rel_err {err:.3g} > {rec['tolerance']:g} ({how} check)")
        return rec
    t2 = time.time()
    runs = []
    for seed in seeds:
        try:
            inp = inputs if seed == seeds[0] else numpy_exec.random_inputs(wl, seed)
            runs.append(backend.time(wl, inp))
        except Exception as e:
            rec.update(status="gpu-error", reason=f"timing: {_err(e)}")
            _free_gpu_memory()
            return rec
    _free_gpu_memory()
    names = list(runs[0]["per_launch_us"])
    rec["measured"] = {"total_us": [float(r["total_us"]) for r in runs],
                       "per_launch_us": {nm: [float(r["per_launch_us"].get(nm, float("nan"))) for r in runs]
                                         for nm in names},
                       "launch_names": names, "seeds": list(seeds)}
    rec["timings_s"]["time"] = round(time.time() - t2, 2)
    if reference and kernel.startswith("attention"):
        t3 = time.time()
        try:
            rec["reference"] = backend.torch_attention(params)
        except Exception as e:
            rec["reference"] = {"error": _err(e)}
        rec["timings_s"]["reference"] = round(time.time() - t3, 2)
        _free_gpu_memory()
    return rec


# --------------------------------------------------------------------------- ncu
def ncu_command(ncu: str, spec_path) -> list:
    return [ncu, "--clock-control", "none", "--metrics", ",".join(NCU_METRICS), "--csv", "--print-units", "base",
            sys.executable, "-m", "gpusim.hw.validate", "--ncu-points", str(spec_path)]


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


def _expected_kernels(kernel: str, params: dict) -> list:
    from ..backends.triton import run as tb

    return [tb.kernel_name(l.program) for l in build(kernel, params).launches]


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
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
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
        cmd = ncu_command(ncu, spec_path)
        _log(f"ncu: profiling points {chunk} ({len(chunk)} points, timeout {timeout:.0f}s)")
        t0 = time.time()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
            text, errtext, rc = p.stdout, p.stderr, p.returncode
        except subprocess.TimeoutExpired as e:
            text = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            errtext = (e.stderr or b"").decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
            rc = "timeout"
        (raw_dir / f"batch{b // NCU_BATCH:02d}.csv").write_text(text)
        (raw_dir / f"batch{b // NCU_BATCH:02d}.log").write_text(errtext[-200000:])
        statuses = {}
        for ln in (text + "\n" + errtext).splitlines():
            if POINT_TAG in ln:
                try:
                    st = json.loads(ln.split(POINT_TAG, 1)[1])
                    statuses[st["index"]] = st
                except (ValueError, KeyError):
                    pass
        kernels = parse_ncu_csv(text)
        expected = []
        for i in chunk:
            try:
                expected.append((i, _expected_kernels(by_index[i]["kernel"], by_index[i]["params"])))
            except Exception as e:
                by_index[i]["ncu"] = {"error": f"cannot name kernels: {_err(e)}"}
        assigned = assign_ncu(kernels, expected, statuses)
        tail = " | ".join((errtext or text).strip().splitlines()[-3:])[-400:]
        for i, _ in expected:
            res = assigned.get(i, {"error": "no result"})
            if "error" in res and not kernels:
                res = {"error": f"ncu returned {rc} with no kernels: {tail}"}
            by_index[i]["ncu"] = res
        meta["batches"].append({"points": chunk, "rc": rc, "seconds": round(time.time() - t0, 1),
                                "kernels_profiled": len(kernels)})
        _log(f"ncu: rc={rc}, {len(kernels)} kernels profiled in {time.time() - t0:.0f}s")
        if not kernels:
            meta["disabled"] = f"ncu failed{' (profiler unavailable)' if _ncu_fatal(text + errtext) else ''}: {tail}"
    return meta


def ncu_points_entry(spec_arg: str) -> int:
    """Body of ``python -m gpusim.validate --ncu-points FILE|JSON``: run each point's launches once
    (under ncu) and print one status line per point."""
    text = spec_arg if spec_arg.lstrip().startswith(("{", "[")) else Path(spec_arg).read_text()
    spec = json.loads(text)
    points = spec["points"] if isinstance(spec, dict) and "points" in spec else (
        spec if isinstance(spec, list) else [spec])
    device = spec.get("device", "cuda") if isinstance(spec, dict) else "cuda"
    from ..backends.triton import run as tb

    for i, pt in enumerate(points):
        idx = pt.get("index", i)
        st = {"index": idx, "status": "ok", "launched": 0, "kernels": []}
        try:
            wl = build(pt["kernel"], pt["params"])
            inputs = numpy_exec.random_inputs(wl, pt.get("seed", SEEDS[0]))
            if hasattr(tb, "_allocate") and hasattr(tb, "_launchers"):
                mem = tb.allocate(wl, inputs, device)
                for launch, (_, go) in zip(wl.launches, tb.launchers(wl, mem)):
                    go()
                    st["launched"] += 1
                    st["kernels"].append(tb.kernel_name(launch.program))
                if device.startswith("cuda"):
                    import torch

                    torch.cuda.synchronize()
                del mem
            else:
                tb.run_workload(wl, inputs, device=device)
                st["launched"] = len(wl.launches)
                st["kernels"] = [tb.kernel_name(la.program) for la in wl.launches]
        except Exception as e:
            st.update(status="error", reason=_err(e))
        print(POINT_TAG + json.dumps(st), file=sys.stderr, flush=True)
        _free_gpu_memory()
    return 0


# --------------------------------------------------------------------------- rows
def _median_spread(xs) -> tuple:
    xs = [float(x) for x in (xs or []) if x is not None and math.isfinite(float(x))]
    if not xs:
        return None, None
    med = float(np.median(xs))
    return med, ((max(xs) - min(xs)) / med * 100.0 if med else None)


def _pct(pred, meas):
    if pred is None or meas is None or not meas:
        return None
    return (pred - meas) / meas * 100.0


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
        m_us, spread = _median_spread(meas.get("total_us"))
        p_us = pred.get("total_us") if pred_ok else None
        mr = sum(x["dram_read_bytes"] for x in nl) if nl and all(x.get("dram_read_bytes") is not None for x in nl) else None
        mw = sum(x["dram_write_bytes"] for x in nl) if nl and all(x.get("dram_write_bytes") is not None for x in nl) else None
        ml2 = sum(x["l2_bytes"] for x in nl) if nl and all(x.get("l2_bytes") is not None for x in nl) else None
        pr = pred.get("dram_read_bytes") if pred_ok else None
        pw = pred.get("dram_write_bytes") if pred_ok else None
        pl2 = (pred.get("l2_read_bytes", 0) + pw) if pred_ok else None
        rows.append({**base, "scope": "point", "launch": "", "measured_us": m_us, "measured_spread_pct": spread,
                     "predicted_us": p_us, "error_pct": _pct(p_us, m_us) if status == "ok" else None,
                     "measured_dram_read_bytes": mr, "measured_dram_write_bytes": mw,
                     "predicted_dram_read_bytes": pr, "predicted_dram_write_bytes": pw,
                     "dram_error_pct": _pct(pr + pw, mr + mw) if None not in (pr, pw, mr, mw) else None,
                     "measured_l2_bytes": ml2, "predicted_l2_bytes": pl2,
                     "reference_eager_us": ref.get("eager_us"), "reference_sdpa_us": ref.get("sdpa_us"),
                     "max_rel_err": rec.get("max_rel_err"), "status": status, "reason": reason})
        names = list(meas.get("launch_names") or [])
        plaunch = (pred.get("launches") or []) if pred_ok else []
        for j in range(max(len(names), len(plaunch))):
            pl = plaunch[j] if j < len(plaunch) else {}
            name = names[j] if j < len(names) else pl.get("launch", f"launch{j}")
            lm, lsp = _median_spread((meas.get("per_launch_us") or {}).get(name))
            lp = pl.get("time_us")
            nj = nl[j] if j < len(nl) else {}
            lmr, lmw = nj.get("dram_read_bytes"), nj.get("dram_write_bytes")
            lpr, lpw = pl.get("dram_read_bytes"), pl.get("dram_write_bytes")
            rows.append({**base, "scope": "launch", "launch": name, "measured_us": lm, "measured_spread_pct": lsp,
                         "predicted_us": lp, "error_pct": _pct(lp, lm) if status == "ok" else None,
                         "measured_dram_read_bytes": lmr, "measured_dram_write_bytes": lmw,
                         "predicted_dram_read_bytes": lpr, "predicted_dram_write_bytes": lpw,
                         "dram_error_pct": _pct(lpr + lpw, lmr + lmw) if None not in (lpr, lpw, lmr, lmw) else None,
                         "measured_l2_bytes": nj.get("l2_bytes"),
                         "predicted_l2_bytes": (pl.get("l2_read_bytes", 0) + lpw) if lpw is not None else None,
                         "reference_eager_us": None, "reference_sdpa_us": None, "max_rel_err": None,
                         "status": status, "reason": reason})
    return rows


def _cell(v):
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        return f"{v:.6g}"
    return v


def _param_columns(rows: list) -> list:
    known = set(BASE_COLUMNS) | set(METRIC_COLUMNS)
    extra = []
    for r in rows:
        for k in r:
            if k not in known and k not in extra:
                extra.append(k)
    return [p for p in ALL_PARAM_NAMES if p in extra] + [p for p in extra if p not in ALL_PARAM_NAMES]


def rows_to_csv(rows: list) -> str:
    cols = list(BASE_COLUMNS) + _param_columns(rows) + list(METRIC_COLUMNS)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({c: _cell(r.get(c)) for c in cols})
    return buf.getvalue()


def _coerce(v, numeric: bool):
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
    """Rows of a saved validation.csv, numbers as floats (empty cells as None)."""
    with open(csv_path, newline="") as f:
        return [{k: _coerce(v, k in NUMERIC_COLUMNS) for k, v in r.items()} for r in csv.DictReader(f)]


# --------------------------------------------------------------------------- analysis
def rankdata(x) -> np.ndarray:
    """1-based ranks, ties get their average rank."""
    x = np.asarray(x, dtype=float)
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    sx = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and sx[j + 1] == sx[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def spearman(a, b):
    """Spearman rank correlation (Pearson correlation of the average ranks); None if undefined."""
    if len(a) != len(b) or len(a) < 2:
        return None
    ra, rb = rankdata(a), rankdata(b)
    if np.std(ra) == 0 or np.std(rb) == 0:
        return None
    return float(np.corrcoef(ra, rb)[0, 1])


def error_stats(values) -> dict:
    v = [float(x) for x in values if x is not None]
    if not v:
        return {"n": 0, "median_abs_pct": None, "p90_abs_pct": None, "mean_signed_pct": None, "max_abs_pct": None}
    a = np.abs(v)
    return {"n": len(v), "median_abs_pct": float(np.median(a)), "p90_abs_pct": float(np.percentile(a, 90)),
            "mean_signed_pct": float(np.mean(v)), "max_abs_pct": float(np.max(a))}


def _num(r, k):
    return _coerce(r.get(k), True)


def analyze(rows: list) -> dict:
    """Summary of validation rows (as built, or as read back from validation.csv)."""
    pts = [r for r in rows if r.get("scope") == "point"]
    lns = [r for r in rows if r.get("scope") == "launch"]
    ok_p = [r for r in pts if r.get("status") == "ok" and _num(r, "error_pct") is not None]
    ok_l = [r for r in lns if r.get("status") == "ok" and _num(r, "error_pct") is not None]
    summary = {"counts": {"points": len(pts), "launch_rows": len(lns),
                          "by_status": dict(Counter(r.get("status", "") for r in pts)),
                          "compared_points": len(ok_p), "compared_launches": len(ok_l)}}
    t = {"point": error_stats(_num(r, "error_pct") for r in ok_p),
         "launch": error_stats(_num(r, "error_pct") for r in ok_l), "point_by_kernel": {}, "launch_by_kernel": {}}
    for k in sorted({r["kernel"] for r in ok_p}):
        t["point_by_kernel"][k] = error_stats(_num(r, "error_pct") for r in ok_p if r["kernel"] == k)
    for k in sorted({(r["kernel"], r["launch"]) for r in ok_l}):
        t["launch_by_kernel"][f"{k[0]}/{k[1]}"] = error_stats(
            _num(r, "error_pct") for r in ok_l if (r["kernel"], r["launch"]) == k)
    summary["time_error"] = t

    groups = []
    by_group: dict = {}
    for r in ok_p:
        by_group.setdefault(r.get("group") or r["kernel"], []).append(r)
    for g, rs in by_group.items():
        if len(rs) < 2:
            continue
        meas = [_num(r, "measured_us") for r in rs]
        pred = [_num(r, "predicted_us") for r in rs]
        bm, bp = int(np.argmin(meas)), int(np.argmin(pred))
        groups.append({"group": g, "kernel": rs[0]["kernel"], "n": len(rs), "spearman": spearman(pred, meas),
                       "measured_best_point": int(_num(rs[bm], "point")), "measured_best_tile": tile_label(rs[bm]),
                       "measured_best_us": meas[bm], "sim_best_point": int(_num(rs[bp], "point")),
                       "sim_best_tile": tile_label(rs[bp]), "sim_best_measured_us": meas[bp],
                       "sim_pick_is_best": bm == bp, "sim_pick_within_5pct": meas[bp] <= 1.05 * meas[bm],
                       "sim_pick_loss_pct": (meas[bp] / meas[bm] - 1.0) * 100.0})
    rhos = [g["spearman"] for g in groups if g["spearman"] is not None and g["n"] >= 3]
    summary["tile_groups"] = groups
    summary["tile_summary"] = {"groups": len(groups), "groups_with_3plus": len(rhos),
                               "mean_spearman": float(np.mean(rhos)) if rhos else None,
                               "median_spearman": float(np.median(rhos)) if rhos else None,
                               "sim_pick_is_best": sum(g["sim_pick_is_best"] for g in groups),
                               "sim_pick_within_5pct": sum(g["sim_pick_within_5pct"] for g in groups)}

    def dram_stats(rs):
        rs = [r for r in rs if _num(r, "dram_error_pct") is not None]
        out = error_stats(_num(r, "dram_error_pct") for r in rs)
        out["read"] = error_stats(_pct(_num(r, "predicted_dram_read_bytes"), _num(r, "measured_dram_read_bytes"))
                                  for r in rs)
        out["write"] = error_stats(_pct(_num(r, "predicted_dram_write_bytes"), _num(r, "measured_dram_write_bytes"))
                                   for r in rs)
        return out

    dram_ok = [r for r in pts if r.get("status") in ("ok", "sim-missing")]
    dram_ok_l = [r for r in lns if r.get("status") in ("ok", "sim-missing")]
    summary["dram"] = {"point": dram_stats(dram_ok), "launch": dram_stats(dram_ok_l),
                       "launch_by_kernel": {f"{k[0]}/{k[1]}": dram_stats([r for r in dram_ok_l
                                                                          if (r["kernel"], r["launch"]) == k])
                                            for k in sorted({(r["kernel"], r["launch"]) for r in dram_ok_l
                                                             if _num(r, "dram_error_pct") is not None})}}
    refs = []
    for r in pts:
        e, s = _num(r, "reference_eager_us"), _num(r, "reference_sdpa_us")
        if e is None and s is None:
            continue
        refs.append({"point": int(_num(r, "point")), "kernel": r["kernel"], "measured_us": _num(r, "measured_us"),
                     "predicted_us": _num(r, "predicted_us"), "eager_us": e, "sdpa_us": s})
    summary["reference"] = refs
    summary["problems"] = [{"point": int(_num(r, "point")), "kernel": r["kernel"], "status": r.get("status"),
                            "reason": r.get("reason", "")} for r in pts if r.get("status") != "ok"]
    return summary


# --------------------------------------------------------------------------- report
def _f(x, fmt="{:.1f}"):
    return "" if x is None else fmt.format(x)


def _varying_params(pts: list) -> list:
    cols = _param_columns(pts)
    return [c for c in cols if len({str(r.get(c)) for r in pts}) > 1]


def _short(r, varying) -> str:
    vals = []
    for c in varying:
        v = r.get(c)
        if v in (None, ""):
            continue
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        vals.append(f"{c}={v}")
    return " ".join(vals)


def summary_markdown(rows: list, summary: dict, meta: dict | None = None) -> str:
    meta = meta or {}
    pts = [r for r in rows if r.get("scope") == "point"]
    varying = _varying_params(pts)
    L = [f"# Validation: {meta.get('scenario_name', '?')} on {meta.get('gpu', pts[0]['gpu'] if pts else '?')}", ""]
    if meta:
        L.append(f"GPU config `{meta.get('gpu')}` (hash {meta.get('gpu_config_hash', '?')}, from "
                 f"{meta.get('gpu_config_source', '?')}); measured on {meta.get('environment', {}).get('device', '?')} "
                 f"({meta.get('started', '')} .. {meta.get('finished', '')}).")
        L.append("")
    c = summary["counts"]
    L += ["## Counts", "", f"{c['points']} points ({c['launch_rows']} launch rows); compared: {c['compared_points']} "
          f"points, {c['compared_launches']} launches.", "",
          "| status | points |", "| --- | --- |"]
    L += [f"| {k} | {v} |" for k, v in sorted(c["by_status"].items())]
    L += ["", "## Time error, (predicted - measured) / measured", "",
          "| scope | n | median abs % | p90 abs % | mean signed % | max abs % |", "| --- | --- | --- | --- | --- | --- |"]
    te = summary["time_error"]

    def line(name, s):
        return (f"| {name} | {s['n']} | {_f(s['median_abs_pct'])} | {_f(s['p90_abs_pct'])} | "
                f"{_f(s['mean_signed_pct'], '{:+.1f}')} | {_f(s['max_abs_pct'])} |")

    L.append(line("per point", te["point"]))
    L.append(line("per launch", te["launch"]))
    for k, s in te["point_by_kernel"].items():
        L.append(line(f"point: {k}", s))
    for k, s in te["launch_by_kernel"].items():
        L.append(line(f"launch: {k}", s))
    ts = summary["tile_summary"]
    L += ["", "## Tile sweeps (points differing only in BLOCK_*/num_stages/num_warps)", ""]
    if ts["groups"]:
        L.append(f"{ts['groups']} groups; Spearman (groups of 3+): mean {_f(ts['mean_spearman'], '{:.3f}')}, "
                 f"median {_f(ts['median_spearman'], '{:.3f}')}; simulator's pick is the measured best in "
                 f"{ts['sim_pick_is_best']}/{ts['groups']}, within 5% of it in {ts['sim_pick_within_5pct']}/{ts['groups']}.")
        L += ["", "| group | n | Spearman | measured best | simulator pick | pick's loss % |", "| --- | --- | --- | --- | --- | --- |"]
        for g in summary["tile_groups"]:
            L.append(f"| {g['group']} | {g['n']} | {_f(g['spearman'], '{:.3f}')} | p{g['measured_best_point']} "
                     f"{g['measured_best_tile']} ({g['measured_best_us']:.1f} us) | p{g['sim_best_point']} "
                     f"{g['sim_best_tile']} | {g['sim_pick_loss_pct']:.1f} |")
    else:
        L.append("No group has two or more compared points.")
    d = summary["dram"]
    L += ["", "## DRAM bytes, simulator vs ncu (read + write)", ""]
    if d["point"]["n"] or d["launch"]["n"]:
        L += ["| scope | n | median abs % | p90 abs % | mean signed % | read median abs % | write median abs % |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
        for name, s in [("per point", d["point"]), ("per launch", d["launch"])] + \
                       [(f"launch: {k}", s) for k, s in d["launch_by_kernel"].items()]:
            L.append(f"| {name} | {s['n']} | {_f(s['median_abs_pct'])} | {_f(s['p90_abs_pct'])} | "
                     f"{_f(s['mean_signed_pct'], '{:+.1f}')} | {_f(s['read']['median_abs_pct'])} | "
                     f"{_f(s['write']['median_abs_pct'])} |")
    else:
        L.append("No ncu counters (ncu not run, not available, or every point skipped).")
    nm = meta.get("ncu") or {}
    if nm.get("disabled"):
        L.append(f"\nncu: {nm['disabled']}")
    if meta.get("ncu_skipped"):
        L.append(f"\nncu skipped (cap --ncu-max / GPUSIM_NCU_MAX = {meta.get('ncu_max')}): points "
                 f"{', '.join(f'p{i}' for i in meta['ncu_skipped'])}")
    if summary["reference"]:
        L += ["", "## PyTorch references (attention)", "", "| point | kernel | measured us | predicted us | eager us | "
              "SDPA flash us |", "| --- | --- | --- | --- | --- | --- |"]
        for r in summary["reference"]:
            L.append(f"| p{r['point']} | {r['kernel']} | {_f(r['measured_us'])} | {_f(r['predicted_us'])} | "
                     f"{_f(r['eager_us'])} | {_f(r['sdpa_us'])} |")
    L += ["", "## Points", "", "| point | kernel | " + " | ".join(varying) +
          " | status | measured us | spread % | predicted us | error % | DRAM error % | max_rel_err |",
          "| --- | --- | " + " | ".join("---" for _ in varying) + " | --- | --- | --- | --- | --- | --- | --- |"]
    for r in pts:
        vals = " | ".join(str(_cell(r.get(v))) for v in varying)
        L.append(f"| p{int(_num(r, 'point'))} | {r['kernel']} | {vals} | {r.get('status')} | "
                 f"{_f(_num(r, 'measured_us'))} | {_f(_num(r, 'measured_spread_pct'))} | {_f(_num(r, 'predicted_us'))} | "
                 f"{_f(_num(r, 'error_pct'), '{:+.1f}')} | {_f(_num(r, 'dram_error_pct'), '{:+.1f}')} | "
                 f"{_f(_num(r, 'max_rel_err'), '{:.2g}')} |")
    if summary["problems"]:
        L += ["", "## Problems", ""]
        L += [f"- p{p['point']} {p['kernel']}: {p['status']}: {p['reason']}" for p in summary["problems"]]
    L += ["", "## Method", "",
          "- Measured: `triton.testing.do_bench` median (L2 cleared before every repetition) of the generated Triton "
          "code, on two random-normal input sets; the number is the median of the two, the spread their difference. "
          "A point whose outputs miss the float64 reference (max_rel_err > 5e-3 fp16, 2e-2 bf16, 1e-2 fp32; large "
          "problems checked on sampled rows) is wrong-result and not timed.",
          "- Per point: the whole launch sequence, L2 cleared once before it (as the simulator starts cold). "
          "Per launch: each launch timed alone with a cleared L2, while the simulator's per-launch time is inside "
          "the sequence (L2 warm from the previous launch): multi-launch workloads differ there by design.",
          "- DRAM bytes: ncu `dram__bytes_read.sum`, `dram__bytes_write.sum` (ncu's default cache control flushes "
          "caches before each profiled kernel, so each launch starts cold), `--clock-control none`.",
          "- Spearman: rank correlation of predicted vs measured time inside each tile-sweep group (ties get average "
          "ranks; groups of 2 are listed but left out of the mean)."]
    return "\n".join(L) + "\n"


def _plots(out_dir: Path, rows: list) -> list:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    pts = [r for r in rows if r.get("scope") == "point"]
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5))
    for ax, scope, title in ((axes[0], "point", "per point (whole launch sequence)"),
                             (axes[1], "launch", "per launch")):
        rs = [r for r in rows if r.get("scope") == scope and r.get("status") == "ok"
              and (_num(r, "measured_us") or 0) > 0 and (_num(r, "predicted_us") or 0) > 0]
        labels = sorted({r["kernel"] if scope == "point" else f"{r['kernel']}/{r['launch']}" for r in rs})
        cmap = plt.get_cmap("tab10" if len(labels) <= 10 else "tab20")
        for i, lab in enumerate(labels):
            sel = [r for r in rs if (r["kernel"] if scope == "point" else f"{r['kernel']}/{r['launch']}") == lab]
            ax.scatter([_num(r, "measured_us") for r in sel], [_num(r, "predicted_us") for r in sel], s=28,
                       color=cmap(i % cmap.N), label=lab, alpha=0.85, edgecolors="none")
        if rs:
            vals = [_num(r, k) for r in rs for k in ("measured_us", "predicted_us")]
            lo, hi = min(vals) / 1.5, max(vals) * 1.5
            x = np.geomspace(lo, hi, 50)
            ax.fill_between(x, x * 0.7, x * 1.3, color="0.85", label="±30%", zorder=0)
            ax.fill_between(x, x * 0.85, x * 1.15, color="0.7", label="±15%", zorder=0)
            ax.plot(x, x, "k-", lw=1, label="y = x")
            ax.set_xlim(lo, hi)
            ax.set_ylim(lo, hi)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.legend(fontsize=7, loc="upper left")
        else:
            ax.text(0.5, 0.5, "no compared rows", ha="center", va="center", transform=ax.transAxes)
        ax.set_xlabel("measured (us)")
        ax.set_ylabel("predicted (us)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    p = out_dir / "scatter.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    written.append(p)

    varying = _varying_params(pts)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(pts) + 2), 5))
    kernels = sorted({r["kernel"] for r in pts})
    cmap = plt.get_cmap("tab10")
    xs = np.arange(len(pts))
    for i, r in enumerate(pts):
        e = _num(r, "error_pct")
        col = cmap(kernels.index(r["kernel"]) % 10)
        if r.get("status") == "ok" and e is not None:
            ax.bar(i, e, color=col)
        else:
            ax.text(i, 0, r.get("status", "?"), rotation=90, ha="center", va="bottom", fontsize=7, color="red")
    for k in kernels:
        ax.bar(0, 0, color=cmap(kernels.index(k) % 10), label=k)
    for y, st in ((15, "--"), (30, ":")):
        ax.axhline(y, color="0.5", ls=st, lw=1)
        ax.axhline(-y, color="0.5", ls=st, lw=1)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(xs)
    ax.set_xticklabels([f"p{int(_num(r, 'point'))} {_short(r, varying)}" for r in pts], rotation=75, ha="right",
                       fontsize=7)
    ax.set_ylabel("time error %")
    ax.set_title("(predicted - measured) / measured per point (dashed ±15%, dotted ±30%)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    p = out_dir / "error_by_point.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    written.append(p)
    return written


def write_report(out_dir, rows: list, summary: dict, meta: dict | None = None) -> list:
    """validation.csv, summary.md, summary.json, scatter.png, error_by_point.png in ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    _atomic_write(out / "validation.csv", rows_to_csv(rows))
    written.append(out / "validation.csv")
    _atomic_write(out / "summary.json", json.dumps(summary, indent=1, default=str))
    written.append(out / "summary.json")
    _atomic_write(out / "summary.md", summary_markdown(rows, summary, meta))
    written.append(out / "summary.md")
    try:
        written += _plots(out, rows)
    except Exception as e:  # plots are a convenience; the CSV and summary stand without them
        _log(f"plots failed: {_err(e)}")
    return written


# --------------------------------------------------------------------------- re-simulation
def load_validation(path) -> dict:
    p = Path(path)
    if p.is_dir():
        p = p / "validation.json"
    return json.loads(p.read_text())


def rows_from_json(validation_json_path) -> list:
    """Rows of a saved validation with the predictions recorded at the time."""
    data = load_validation(validation_json_path)
    return build_rows(data["points"], data.get("gpu", "?"), data.get("param_names"))


def _simulate_all(points: list, cfg: GPUConfig, jobs: int | None = None) -> list:
    """[prediction] for [(kernel, params, fidelity)], in worker processes when jobs > 1."""
    jobs = jobs if jobs is not None else max(1, min(len(points), (os.cpu_count() or 2) - 1))
    if jobs <= 1 or len(points) <= 1:
        return [simulate_point(k, p, cfg, f) for k, p, f in points]
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    data = cfg.model_dump()
    with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn")) as ex:
        return list(ex.map(simulate_point, [k for k, _, _ in points], [p for _, p, _ in points],
                           [data] * len(points), [f for _, _, f in points]))


def resimulate(validation_json_path, gpu_config, jobs: int | None = 1) -> list:
    """Rows of a saved validation with every point re-predicted on ``gpu_config`` (a GPUConfig,
    a config name or a YAML path). Measured numbers are kept as recorded."""
    data = load_validation(validation_json_path)
    cfg = gpu_config if isinstance(gpu_config, GPUConfig) else load_gpu(gpu_config)
    recs = data["points"]
    preds = _simulate_all([(r["kernel"], r["params"], r.get("fidelity", "fast")) for r in recs], cfg, jobs)
    for r, p in zip(recs, preds):
        r["predicted"] = p
    return build_rows(recs, cfg.name, data.get("param_names"))


# --------------------------------------------------------------------------- the run
def _environment_meta(backend) -> dict:
    try:
        return backend.environment()
    except Exception as e:
        return {"error": _err(e)}


def run_validation(sc, cfg: GPUConfig, out: Path, backend=None, *, ncu: bool = True, ncu_max: int = NCU_MAX_DEFAULT,
                   reference: bool = False, deadline: float | None = None, jobs: int | None = None,
                   seeds=SEEDS, config_source: str = "") -> tuple:
    """Measure and predict every point of scenario ``sc``; returns (records, meta). Saves
    ``out/validation.json`` after every point."""
    from .. import __version__

    backend = backend or TritonCudaBackend()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        from ..provenance import git_revision

        rev = git_revision()
    except Exception:
        rev = None
    meta = {"scenario_name": sc.name, "scenario_source": str(sc.source), "scenario": sc.data, "gpu": cfg.name,
            "gpu_config_hash": cfg.config_hash(), "gpu_config_source": config_source, "gpu_config": cfg.model_dump(),
            "gpusim_version": __version__, "git_revision": rev, "param_names": list(sc.param_names),
            "seeds": list(seeds), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "ncu_max": ncu_max,
            "tolerances": TOL, "sample_rows": SAMPLE_ROWS}
    records = [{"index": i, "kernel": pt.kernel, "params": dict(pt.params), "fidelity": pt.fidelity,
                "group": group_key(pt.kernel, pt.params), "status": "skipped", "reason": "not run",
                "predicted": None, "ncu": None} for i, pt in enumerate(sc.points)]

    def save():
        meta["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        _atomic_write(out / "validation.json", json.dumps({**meta, "points": records}, indent=1, default=str))

    pool, futures = None, {}
    jobs = jobs if jobs is not None else max(1, min(len(records), (os.cpu_count() or 2) - 2))
    if jobs > 1:
        try:
            import multiprocessing as mp
            from concurrent.futures import ProcessPoolExecutor

            pool = ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn"))
            data = cfg.model_dump()
            futures = {r["index"]: pool.submit(simulate_point, r["kernel"], r["params"], data, r["fidelity"])
                       for r in records}
            _log(f"simulating {len(records)} points on {cfg.name} in {jobs} worker processes")
        except Exception as e:
            _log(f"process pool unavailable ({_err(e)}); simulating inline after measuring")
            pool, futures = None, {}
    meta["environment"] = _environment_meta(backend)
    _log(f"{sc.name}: {len(records)} points, measured on {meta['environment'].get('device', backend.name)}, "
         f"predicted with {cfg.name} ({cfg.config_hash()})")
    save()
    try:
        for rec in records:
            if deadline is not None and time.time() > deadline:
                rec.update(status="skipped", reason="time budget (GPUSIM_DEADLINE) reached")
                continue
            t0 = time.time()
            rec.update(measure_point(rec["kernel"], rec["params"], backend, seeds, reference))
            m = rec.get("measured") or {}
            med, sp = _median_spread(m.get("total_us"))
            desc = " ".join(f"{k}={v}" for k, v in rec["params"].items() if k in meta["param_names"])
            _log(f"[{rec['index'] + 1}/{len(records)}] {rec['kernel']} {desc}: {rec['status']}"
                 + (f" err={rec['max_rel_err']:.2g}" if rec.get("max_rel_err") is not None else "")
                 + (f" measured {med:.1f} us (spread {sp:.1f}%)" if med is not None else "")
                 + (f" ({rec['reason']})" if rec["reason"] else "") + f" [{time.time() - t0:.1f}s]")
            save()
        _log("collecting predictions")
        for rec in records:
            f = futures.get(rec["index"])
            try:
                if f is None:
                    rec["predicted"] = simulate_point(rec["kernel"], rec["params"], cfg, rec["fidelity"])
                else:
                    wait = None if deadline is None else max(10.0, deadline - time.time())
                    rec["predicted"] = f.result(timeout=wait)
            except Exception as e:  # includes the timeout: resimulate() can fill it in later
                rec["predicted"] = {"status": "error", "reason": f"worker: {_err(e) or type(e).__name__}"}
            p = rec["predicted"]
            med, _ = _median_spread((rec.get("measured") or {}).get("total_us"))
            if p.get("status") == "ok" and med:
                _log(f"  p{rec['index']}: predicted {p['total_us']:.1f} us vs measured {med:.1f} us "
                     f"({_pct(p['total_us'], med):+.1f}%) [sim {p.get('sim_seconds')}s]")
            elif p.get("status") != "ok":
                _log(f"  p{rec['index']}: simulator {p.get('status')}: {p.get('reason')}")
        save()
    finally:
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
    if ncu:
        sel, skipped = select_ncu_points(records, ncu_max)
        meta["ncu_selected"], meta["ncu_skipped"] = sel, skipped
        for i in skipped:
            records[i]["ncu"] = {"error": f"skipped: more than --ncu-max {ncu_max} points"}
        if sel:
            meta["ncu"] = run_ncu(records, sel, out, deadline)
        save()
    else:
        meta["ncu"] = {"disabled": "--no-ncu"}
    save()
    return records, meta


def _ncu_max(args) -> int:
    v = getattr(args, "ncu_max", None)
    if v is None and os.environ.get("GPUSIM_NCU_MAX"):
        v = int(os.environ["GPUSIM_NCU_MAX"])
    return NCU_MAX_DEFAULT if v is None else int(v)


def print_table(rows: list) -> None:
    pts = [r for r in rows if r.get("scope") == "point"]
    varying = _varying_params(pts)
    hdr = ["point", "kernel"] + varying + ["status", "measured_us", "predicted_us", "error_%", "dram_err_%"]
    table = [[f"p{r['point']}", r["kernel"]] + [str(_cell(r.get(v))) for v in varying] +
             [r["status"], _f(r.get("measured_us")), _f(r.get("predicted_us")), _f(r.get("error_pct"), "{:+.1f}"),
              _f(r.get("dram_error_pct"), "{:+.1f}")] for r in pts]
    w = [max(len(h), *(len(x[i]) for x in table)) if table else len(h) for i, h in enumerate(hdr)]
    print("  ".join(h.rjust(wi) for h, wi in zip(hdr, w)))
    for line in table:
        print("  ".join(c.rjust(wi) for c, wi in zip(line, w)))
    sys.stdout.flush()


def main(args) -> int:
    """Entry point of ``gpusim validate`` (args: scenario, gpu, out, set, no_ncu, reference)."""
    from ..sweep.scenario import load_scenario

    sc = load_scenario(args.scenario, args.set)
    cfg = load_gpu(args.gpu)
    out = Path(args.out)
    deadline = float(os.environ["GPUSIM_DEADLINE"]) if os.environ.get("GPUSIM_DEADLINE") else None
    t0 = time.time()
    records, meta = run_validation(sc, cfg, out, ncu=not args.no_ncu, ncu_max=_ncu_max(args),
                                   reference=bool(args.reference), deadline=deadline, config_source=str(args.gpu))
    rows = build_rows(records, cfg.name, list(sc.param_names))
    summary = analyze(rows)
    written = write_report(out, rows, summary, meta)
    print_table(rows)
    te = summary["time_error"]
    _log(f"done in {time.time() - t0:.0f}s: {summary['counts']['by_status']}; per point median |err| "
         f"{_f(te['point']['median_abs_pct'])}%, p90 {_f(te['point']['p90_abs_pct'])}%")
    _log("wrote " + ", ".join(str(p) for p in [out / "validation.json"] + written))
    return 0 if summary["counts"]["compared_points"] else 1


def _cli(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m gpusim.validate",
                                 description="ncu entry point and offline re-analysis of a validation run")
    ap.add_argument("--ncu-points", "--ncu-point", dest="ncu_points", metavar="FILE|JSON",
                    help="run the listed points once each (what ncu profiles)")
    ap.add_argument("--reanalyze", metavar="DIR", help="recompute the report of DIR/validation.json")
    ap.add_argument("--gpu", help="with --reanalyze: re-simulate every point on this config")
    ap.add_argument("--out", help="with --reanalyze: write the report here (default DIR)")
    ap.add_argument("--jobs", type=int, default=None, help="worker processes for re-simulation")
    a = ap.parse_args(argv)
    if a.ncu_points:
        return ncu_points_entry(a.ncu_points)
    if a.reanalyze:
        data = load_validation(a.reanalyze)
        meta = {k: v for k, v in data.items() if k != "points"}
        if a.gpu:
            cfg = load_gpu(a.gpu)
            rows = resimulate(a.reanalyze, cfg, a.jobs)
            meta.update(gpu=cfg.name, gpu_config_hash=cfg.config_hash(), gpu_config_source=a.gpu)
        else:
            rows = rows_from_json(a.reanalyze)
        summary = analyze(rows)
        out = Path(a.out or (a.reanalyze if Path(a.reanalyze).is_dir() else Path(a.reanalyze).parent))
        written = write_report(out, rows, summary, meta)
        print_table(rows)
        print("wrote " + ", ".join(map(str, written)))
        return 0
    ap.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(_cli())
