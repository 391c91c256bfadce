"""Scenario YAML -> validated points -> results (CSV rows), with caching and parallel execution.

A scenario names a GPU, a kernel, its params and an optional sweep (a cartesian product over any
of params, ``gpu`` and ``kernel``). Every finished point is saved under ``DIR/points/KEY.json``
as it finishes; the key hashes everything that determines the result (point, GPU config, gpusim
version), so re-running skips finished points and an interrupted sweep loses nothing.
"""
from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from . import __version__
from .hardware import ConfigError, available_gpus, load_gpu
from .kernels import ALL_PARAM_NAMES, KERNELS, KernelParamError, resolve_params
from .result import KERNEL_COLUMNS, METRIC_COLUMNS

TOP_KEYS = ("name", "description", "gpu", "kernel", "params", "sweep", "check", "fidelity")


class ScenarioError(ValueError):
    """Bad scenario input: the message is one line naming file, field, value and what is allowed."""


def _err(src, field, msg):
    return ScenarioError(f"{src}: {field}: {msg}")


def _did_you_mean(word, options):
    close = difflib.get_close_matches(str(word), list(options), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


@dataclass(frozen=True)
class Point:
    gpu: str
    kernel: str
    params: dict
    check: object
    fidelity: str

    def key(self, config_hash: str) -> str:
        blob = json.dumps({"gpu": self.gpu, "kernel": self.kernel, "params": self.params, "check": self.check,
                           "fidelity": self.fidelity, "config": config_hash, "version": __version__},
                          sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:20]


@dataclass
class Scenario:
    name: str
    source: str
    data: dict          # the resolved scenario (after --set overrides)
    points: list
    param_names: list
    config_hashes: dict


def read_yaml(path: str | Path) -> dict:
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise ScenarioError(f"{p}: file not found") from None
    except IsADirectoryError:
        raise ScenarioError(f"{p}: is a directory, expected a scenario YAML file") from None
    except OSError as e:
        raise ScenarioError(f"{p}: cannot read: {e.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "?"
        raise ScenarioError(f"{p}: YAML syntax error at {where}: {getattr(e, 'problem', None) or e}") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{p}: expected a mapping with keys {', '.join(TOP_KEYS)}, got {type(data).__name__}")
    return data


def apply_set(data: dict, assignments: list, src: str = "--set") -> dict:
    """Apply ``key=value`` overrides (dotted paths; values parsed as YAML)."""
    data = json.loads(json.dumps(data))
    for a in assignments or []:
        if "=" not in a:
            raise ScenarioError(f"{src}: {a!r}: expected KEY=VALUE, e.g. params.head_dim=128")
        key, raw = a.split("=", 1)
        try:
            val = yaml.safe_load(raw)
        except yaml.YAMLError:
            val = raw
        parts = key.strip().split(".")
        cur = data
        for part in parts[:-1]:
            if not isinstance(cur.get(part, {}), dict):
                raise ScenarioError(f"{src}: {key}: {part} is not a mapping")
            cur = cur.setdefault(part, {})
        cur[parts[-1]] = val
    return data


def _check_value(src, field, kernel, name, val):
    """Validate one parameter value against a kernel that takes it."""
    try:
        resolve_params(kernel, {name: val})
    except KernelParamError as e:
        raise _err(src, field, str(e)) from None


def load_scenario(path: str | Path, overrides: list | None = None, data: dict | None = None) -> Scenario:
    src = str(path)
    data = apply_set(read_yaml(path) if data is None else data, overrides)
    for k in data:
        if k not in TOP_KEYS:
            raise _err(src, k, f"unknown key{_did_you_mean(k, TOP_KEYS)}; allowed: {', '.join(TOP_KEYS)}")
    name = data.get("name", Path(src).stem)
    if not isinstance(name, str):
        raise _err(src, "name", f"must be a string, got {name!r}")
    params = data.get("params") or {}
    if not isinstance(params, dict):
        raise _err(src, "params", f"must be a mapping of parameter: value, got {params!r}")
    sweep = data.get("sweep") or {}
    if not isinstance(sweep, dict):
        raise _err(src, "sweep", f"must be a mapping of field: [values], got {sweep!r}")
    check = data.get("check", "auto")
    if check not in ("auto", True, False):
        raise _err(src, "check", f"must be auto, true or false, got {check!r}")
    fidelity = data.get("fidelity", "fast")
    if fidelity not in ("fast", "full"):
        raise _err(src, "fidelity", f"must be fast or full, got {fidelity!r}")

    axes = {}
    for k, vals in sweep.items():
        if k not in ("gpu", "kernel") and k not in ALL_PARAM_NAMES:
            raise _err(src, f"sweep.{k}", f"unknown parameter{_did_you_mean(k, ALL_PARAM_NAMES + ('gpu', 'kernel'))}; "
                                          f"sweepable: gpu, kernel, {', '.join(ALL_PARAM_NAMES)}")
        if not isinstance(vals, list):
            raise _err(src, f"sweep.{k}", f"must be a list of values, got {vals!r}")
        if not vals:
            raise _err(src, f"sweep.{k}", "is an empty list: give at least one value")
        axes[k] = vals

    base_gpu = data.get("gpu", "h100")
    base_kernel = data.get("kernel")
    if base_kernel is None and "kernel" not in axes:
        raise _err(src, "kernel", f"missing; choose one of {', '.join(KERNELS)}")
    gpus = axes.get("gpu", [base_gpu])
    kernels = axes.get("kernel", [base_kernel])
    for i, g in enumerate(gpus):
        field = f"sweep.gpu[{i}]" if "gpu" in axes else "gpu"
        if not isinstance(g, str):
            raise _err(src, field, f"must be a GPU name or a path, got {g!r}")
    for i, k in enumerate(kernels):
        field = f"sweep.kernel[{i}]" if "kernel" in axes else "kernel"
        if k not in KERNELS:
            raise _err(src, field, f"unknown kernel {k!r}{_did_you_mean(k, KERNELS)}; available: {', '.join(KERNELS)}")
    for pname, val in params.items():
        if pname not in ALL_PARAM_NAMES:
            raise _err(src, f"params.{pname}", f"unknown parameter{_did_you_mean(pname, ALL_PARAM_NAMES)}; "
                                               f"parameters: {', '.join(ALL_PARAM_NAMES)}")
        takers = [k for k in kernels if KERNELS[k].param(pname)]
        if not takers:
            raise _err(src, f"params.{pname}", f"no kernel in this scenario ({', '.join(kernels)}) takes {pname!r}")
        _check_value(src, f"params.{pname}", takers[0], pname, val)
    for pname, vals in axes.items():
        if pname in ("gpu", "kernel"):
            continue
        takers = [k for k in kernels if KERNELS[k].param(pname)]
        if not takers:
            raise _err(src, f"sweep.{pname}", f"no kernel in this scenario ({', '.join(kernels)}) takes {pname!r}")
        for i, v in enumerate(vals):
            _check_value(src, f"sweep.{pname}[{i}]", takers[0], pname, v)

    config_hashes = {}
    for i, g in enumerate(gpus):
        try:
            config_hashes[g] = load_gpu(g).config_hash()
        except ConfigError as e:
            field = f"sweep.gpu[{i}]" if "gpu" in axes else "gpu"
            raise _err(src, field, str(e)) from None

    names = list(axes)
    points = []
    for combo in itertools.product(*(axes[k] for k in names)):
        d = dict(zip(names, combo))
        gpu = d.pop("gpu", base_gpu)
        kernel = d.pop("kernel", base_kernel)
        p = dict(params)
        p.update(d)
        p = {k: v for k, v in p.items() if KERNELS[kernel].param(k)}
        points.append(Point(gpu, kernel, resolve_params(kernel, p), check, fidelity))
    param_names = [p for p in ALL_PARAM_NAMES if any(p in pt.params for pt in points)]
    return Scenario(name, src, data, points, param_names, config_hashes)


# --------------------------------------------------------------------------- running points
def run_point(point: Point, timeline: bool = False):
    """Simulate one point; never raises: failures become status=error rows."""
    from .api import simulate

    try:
        r = simulate(point.kernel, point.gpu, check=point.check, fidelity=point.fidelity, timeline=timeline,
                     **point.params)
    except Exception as e:  # a failing point is recorded and the sweep goes on
        return {"status": "error", "reason": f"{type(e).__name__}: {e}".splitlines()[0]}, [], None
    row = r.row(list(point.params))
    kernels = [k.row(0) for k in r.kernels]
    return row, kernels, (r if timeline else None)


def _atomic_write(path: Path, text: str):
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


class Progress:
    """A one-line progress bar on stderr (points done, rate, time left); silent when not a terminal."""

    def __init__(self, total: int, enabled: bool | None = None):
        self.total, self.done, self.t0 = total, 0, time.time()
        self.enabled = sys.stderr.isatty() if enabled is None else enabled

    def update(self, n=1):
        self.done += n
        if not self.enabled:
            return
        el = time.time() - self.t0
        rate = self.done / el if el > 0 else 0.0
        left = (self.total - self.done) / rate if rate else 0.0
        w = 30
        fill = int(w * self.done / max(1, self.total))
        sys.stderr.write(f"\r[{'#' * fill}{'.' * (w - fill)}] {self.done}/{self.total} points "
                         f"{rate:.2f}/s, {left:.0f}s left ")
        sys.stderr.flush()

    def close(self):
        if self.enabled:
            sys.stderr.write("\n")


def run_scenario(sc: Scenario, out: Path, jobs: int | None = None, force: bool = False, executor: str = "local",
                 scheduler: str | None = None, progress: bool | None = None) -> tuple:
    """Run every point (cached ones are skipped), write results.csv, kernels.csv, manifest.json.

    Returns (rows, kernel_rows)."""
    out = Path(out)
    pdir = out / "points"
    try:
        pdir.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise ScenarioError(f"--out {out}: cannot write there: {e.strerror}") from None
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    keys = [pt.key(sc.config_hashes[pt.gpu]) for pt in sc.points]
    todo = [i for i, k in enumerate(keys) if force or not (pdir / f"{k}.json").exists()]
    todo = list(dict.fromkeys(todo))
    uniq, seen = [], set()
    for i in todo:
        if keys[i] not in seen:
            seen.add(keys[i])
            uniq.append(i)
    bar = Progress(len(uniq), progress)

    def save(i, res):
        row, krows, _ = res
        _atomic_write(pdir / f"{keys[i]}.json", json.dumps({"point": _point_dict(sc.points[i]), "row": row,
                                                             "kernels": krows}, sort_keys=True))
        bar.update()

    try:
        if executor == "dask":
            from .executors import run_dask

            run_dask([sc.points[i] for i in uniq], scheduler, lambda j, res: save(uniq[j], res))
        elif (jobs or 1) <= 1 or len(uniq) <= 1:
            for i in uniq:
                save(i, run_point(sc.points[i]))
        else:
            from concurrent.futures import ProcessPoolExecutor, as_completed

            with ProcessPoolExecutor(max_workers=jobs) as ex:
                futs = {ex.submit(run_point, sc.points[i]): i for i in uniq}
                for f in as_completed(futs):
                    save(futs[f], f.result())
    finally:
        bar.close()
    rows, krows = collect(sc, out, keys)
    write_csvs(out, sc, rows, krows)
    manifest = {"scenario": sc.data, "source": sc.source, "gpusim_version": __version__, "git_revision": _git_rev(),
                "config_hashes": sc.config_hashes, "points": len(sc.points), "computed": len(uniq),
                "started": started, "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    _atomic_write(out / "manifest.json", json.dumps(manifest, indent=2, sort_keys=True, default=str))
    return rows, krows


def _point_dict(pt: Point) -> dict:
    return {"gpu": pt.gpu, "kernel": pt.kernel, "params": pt.params, "check": pt.check, "fidelity": pt.fidelity}


def collect(sc: Scenario, out: Path, keys: list) -> tuple:
    rows, krows = [], []
    for i, (pt, k) in enumerate(zip(sc.points, keys)):
        f = out / "points" / f"{k}.json"
        if not f.exists():
            continue
        d = json.loads(f.read_text())
        row = {"gpu": pt.gpu, "kernel": pt.kernel}
        for n in sc.param_names:
            row[n] = pt.params.get(n, "")
        for c in METRIC_COLUMNS:
            row[c] = d["row"].get(c, "")
        rows.append(row)
        for kr in d["kernels"]:
            kr = dict(kr)
            kr["point"] = len(rows) - 1
            krows.append(kr)
    return rows, krows


def write_csvs(out: Path, sc: Scenario, rows: list, krows: list):
    import csv
    import io

    cols = ["gpu", "kernel"] + sc.param_names + list(METRIC_COLUMNS)
    for name, header, data in (("results.csv", cols, rows), ("kernels.csv", list(KERNEL_COLUMNS), krows)):
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=header, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        for r in data:
            w.writerow({k: _fmt(r.get(k, "")) for k in header})
        _atomic_write(out / name, buf.getvalue())


def _fmt(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    return v


def _git_rev() -> str | None:
    import subprocess

    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                              cwd=Path(__file__).parent).stdout.strip() or None
    except Exception:
        return None


def format_table(rows: list, param_names: list) -> str:
    """The readable table `gpusim run` prints."""
    swept = [p for p in param_names if len({str(r.get(p)) for r in rows}) > 1]
    cols = ["gpu", "kernel"] + swept + ["status", "time_us", "tflops", "dram_read_bytes", "dram_write_bytes",
                                         "l2_hit_rate", "bound", "max_rel_err"]
    head = {"dram_read_bytes": "dram_read_MB", "dram_write_bytes": "dram_write_MB"}
    table = []
    for r in rows:
        line = []
        for c in cols:
            v = r.get(c, "")
            if c in ("dram_read_bytes", "dram_write_bytes") and v != "":
                v = f"{float(v) / 1e6:.1f}"
            elif c == "l2_hit_rate" and v != "":
                v = f"{float(v):.1%}"
            elif c == "time_us" and v != "":
                v = f"{float(v):.1f}"
            elif c == "tflops" and v != "":
                v = f"{float(v):.1f}"
            line.append(str(v))
        table.append(line)
    hdr = [head.get(c, c) for c in cols]
    widths = [max(len(h), *(len(x[i]) for x in table)) if table else len(h) for i, h in enumerate(hdr)]
    out = ["  ".join(h.rjust(w) for h, w in zip(hdr, widths)), "  ".join("-" * w for w in widths)]
    out += ["  ".join(x.rjust(w) for x, w in zip(line, widths)) for line in table]
    bad = [r for r in rows if r.get("status") != "ok"]
    for r in bad:
        out.append(f"{r['kernel']} {r['status']}: {r['reason']}")
    return "\n".join(out)
