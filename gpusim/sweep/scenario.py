"""Scenario YAML -> validated points -> results (CSV rows), with caching and parallel execution.

A scenario names a GPU, a kernel, its params and an optional sweep (a cartesian product over any
of params, ``gpu`` and ``kernel``). ``load_scenario`` validates everything before any work starts:
a mistake raises ``ScenarioError`` with one line naming the file, the field path, the bad value
and what is allowed. ``run_scenario`` saves every finished point under ``DIR/points/KEY.json``
(atomically) as it finishes; the key hashes everything that determines the result (point, GPU
config, gpusim version), so re-running skips finished points and an interrupted sweep loses
nothing. Points run serially, in a local process pool, or on a dask cluster (``executors``).
"""
from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import os
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .. import __version__
from ..backends.sim.cost import resources_mode
from ..hardware import ConfigError, GPUConfig, load_gpu
from ..provenance import git_revision
from ..kernels import ALL_PARAM_NAMES, KERNELS, KernelParamError, resolve_params
from ..result import KERNEL_COLUMNS, METRIC_COLUMNS

TOP_KEYS = ("name", "description", "gpu", "kernel", "params", "sweep", "check", "fidelity", "max_work")


class ScenarioError(ValueError):
    """Bad scenario input: the message is one line naming file, field, value and what is allowed."""


class RunError(RuntimeError):
    """The run could not finish (a worker process died, the cluster failed); finished points are saved."""


def _did_you_mean(word, options):
    close = difflib.get_close_matches(str(word), [str(o) for o in options], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


@dataclass(frozen=True)
class Point:
    """One simulation: everything that determines its result. ``config`` is the loaded GPU, carried
    along so workers (local or remote) need not find the GPU YAML themselves."""

    gpu: str
    kernel: str
    params: dict
    check: object
    fidelity: str
    config: GPUConfig | None = field(default=None, compare=False, repr=False)
    max_work: float | None = field(default=None, compare=False)   # precheck's limit; not in the key

    def key(self, config_hash: str) -> str:
        blob = json.dumps({"gpu": self.gpu, "kernel": self.kernel, "params": self.params, "check": self.check,
                           "fidelity": self.fidelity, "config": config_hash, "version": __version__,
                           "resources": resources_mode()},
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
    overrides: list = field(default_factory=list)


# --------------------------------------------------------------------------- reading and validating
def read_yaml(path: str | Path) -> dict:
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise ScenarioError(f"{p}: file not found") from None
    except IsADirectoryError:
        raise ScenarioError(f"{p}: is a directory, expected a scenario YAML file") from None
    except UnicodeDecodeError as e:
        raise ScenarioError(f"{p}: not a text file (byte {e.start} is not UTF-8); "
                            f"expected a scenario YAML file") from None
    except OSError as e:
        raise ScenarioError(f"{p}: cannot read: {e.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "?"
        raise ScenarioError(f"{p}: YAML syntax error at {where}: {getattr(e, 'problem', None) or e}") from None
    if data is None:
        raise ScenarioError(f"{p}: the file is empty; expected a mapping with keys {', '.join(TOP_KEYS)}")
    if not isinstance(data, dict):
        raise ScenarioError(f"{p}: expected a mapping with keys {', '.join(TOP_KEYS)}, "
                            f"got a {type(data).__name__}: {_short(data)}")
    return data


def _short(v, n=60) -> str:
    s = repr(v)
    return s if len(s) <= n else s[:n - 3] + "..."


def apply_set(data: dict, assignments: list, src: str = "--set") -> dict:
    """Apply ``key=value`` overrides (dotted paths; values parsed as YAML) to a copy of ``data``."""
    data = json.loads(json.dumps(data, default=str))
    for a in assignments or []:
        if "=" not in a:
            raise ScenarioError(f"{src} {a!r}: expected KEY=VALUE with a dotted field path, "
                                f"e.g. params.head_dim=128 or sweep.seq_len=[512,1024]")
        key, raw = a.split("=", 1)
        parts = key.strip().split(".")
        if not all(parts):
            raise ScenarioError(f"{src} {a!r}: empty field path {key.strip()!r}; expected e.g. params.head_dim=128")
        try:
            val = yaml.safe_load(raw)
        except yaml.YAMLError as e:
            raise ScenarioError(f"{src} {a!r}: {key.strip()}: value {raw!r} is not valid YAML "
                                f"({getattr(e, 'problem', None) or e}); quote strings, write lists as [a,b]") from None
        cur = data
        for depth, part in enumerate(parts[:-1]):
            nxt = cur.get(part)
            if nxt is None:
                nxt = cur[part] = {}
            elif not isinstance(nxt, dict):
                raise ScenarioError(f"{src} {a!r}: {'.'.join(parts[:depth + 1])} is {_short(nxt)}, "
                                    f"not a mapping, so it has no field {parts[depth + 1]!r}")
            cur = nxt
        cur[parts[-1]] = val
    return data


def _expected(pname: str) -> str:
    """What a parameter accepts, in words (from the first kernel that takes it)."""
    for spec in KERNELS.values():
        p = spec.param(pname)
        if p is None:
            continue
        if p.choices:
            return f"one of {', '.join(map(str, p.choices))}"
        if p.kind is bool:
            return "true or false"
        if p.kind is int:
            return "a positive integer" if p.positive else "an integer"
        return "a string"
    return "a value"


class _Checker:
    """Builds one-line errors; a field that came from ``--set`` says so."""

    def __init__(self, src: str, overrides: list):
        self.src = src
        self.sets = [(a.split("=", 1)[0].strip(), a) for a in overrides or [] if "=" in a]

    def err(self, fld: str, msg: str) -> ScenarioError:
        base = re.sub(r"\[\d+\]", "", fld)
        for key, a in self.sets:
            if base == key or base.startswith(key + ".") or key.startswith(base + "."):
                return ScenarioError(f"{self.src}: {fld} (from --set {a}): {msg}")
        return ScenarioError(f"{self.src}: {fld}: {msg}")


def _check_value(ck: _Checker, fld: str, kernels: list, name: str, val):
    """Validate one parameter value against every kernel in the scenario that takes it."""
    if val is None:
        raise ck.err(fld, f"no value given; expected {_expected(name)}")
    for k in kernels:
        if KERNELS[k].param(name) is None:
            continue
        try:
            resolve_params(k, {name: val})
        except KernelParamError as e:
            raise ck.err(fld, str(e)) from None


def _load_gpu(g: str) -> GPUConfig:
    """``load_gpu`` with a did-you-mean for unknown fields in a GPU YAML given by path."""
    try:
        return load_gpu(g)
    except ConfigError as e:
        m = re.search(r"field (\w+): Extra inputs are not permitted", str(e))
        if not m:
            raise
        fields = list(GPUConfig.model_fields)
        raise ConfigError(f"{g}: unknown field {m.group(1)!r}{_did_you_mean(m.group(1), fields)}; "
                          f"GPU fields: {', '.join(fields)}") from None


def load_scenario(path: str | Path, overrides: list | None = None, data: dict | None = None) -> Scenario:
    """Read, override (``--set``) and validate a scenario; expand its sweep into points."""
    src = str(path)
    ck = _Checker(src, overrides)
    err = ck.err
    data = apply_set(read_yaml(path) if data is None else data, overrides)
    for k in data:
        if k not in TOP_KEYS:
            hint = (f" (did you mean 'params.{k}'?)" if k in ALL_PARAM_NAMES else _did_you_mean(k, TOP_KEYS))
            raise err(str(k), f"unknown key{hint}; allowed: {', '.join(TOP_KEYS)}")
    name = data.get("name", Path(src).stem)
    if not isinstance(name, str) or not name:
        raise err("name", f"must be a non-empty string, got {_short(name)}")
    if not isinstance(data.get("description", ""), str):
        raise err("description", f"must be a string, got {_short(data['description'])}")
    params = data.get("params")
    params = {} if params is None else params
    if not isinstance(params, dict):
        raise err("params", f"must be a mapping of parameter: value, got {_short(params)}")
    sweep = data.get("sweep")
    sweep = {} if sweep is None else sweep
    if not isinstance(sweep, dict):
        raise err("sweep", f"must be a mapping of field: [values], got {_short(sweep)}")
    check = data.get("check", "auto")
    if not (check == "auto" or isinstance(check, bool)):
        raise err("check", f"must be auto, true or false, got {_short(check)}")
    fidelity = data.get("fidelity", "fast")
    if fidelity not in ("fast", "full"):
        raise err("fidelity", f"must be fast or full, got {_short(fidelity)}")
    max_work = data.get("max_work")
    if isinstance(max_work, str):       # YAML 1.1 reads 1e8 (no dot) as a string
        try:
            max_work = float(max_work)
        except ValueError:
            pass
    if max_work is not None and (isinstance(max_work, bool) or not isinstance(max_work, (int, float))
                                 or not max_work > 0):
        raise err("max_work", f"must be a positive number of work units (e.g. 1e8), got {_short(max_work)}")

    sweepable = ("gpu", "kernel") + ALL_PARAM_NAMES
    axes = {}
    for k, vals in sweep.items():
        if k not in sweepable:
            raise err(f"sweep.{k}", f"unknown parameter{_did_you_mean(k, sweepable)}; "
                                    f"sweepable: {', '.join(sweepable)}")
        if not isinstance(vals, list):
            raise err(f"sweep.{k}", f"must be a list of values, e.g. [{_short(vals)}], got {_short(vals)}")
        if not vals:
            raise err(f"sweep.{k}", "is an empty list []; give at least one value")
        axes[k] = vals

    base_gpu = data.get("gpu", "h100")
    base_kernel = data.get("kernel")
    if base_kernel is None and "kernel" not in axes:
        raise err("kernel", f"missing; choose one of {', '.join(KERNELS)}")
    gpus = axes.get("gpu", [base_gpu])
    kernels = axes.get("kernel", [base_kernel])
    for i, g in enumerate(gpus):
        if not isinstance(g, str) or not g:
            raise err(f"sweep.gpu[{i}]" if "gpu" in axes else "gpu",
                      f"must be a GPU name (see `gpusim gpus`) or a path to a GPU YAML, got {_short(g)}")
    for i, k in enumerate(kernels):
        if not (isinstance(k, str) and k in KERNELS):
            raise err(f"sweep.kernel[{i}]" if "kernel" in axes else "kernel",
                      f"unknown kernel {_short(k)}{_did_you_mean(k, KERNELS)}; available: {', '.join(KERNELS)}")
    kernels = list(dict.fromkeys(kernels))
    taken = list(dict.fromkeys(p.name for k in kernels for p in KERNELS[k].params))
    for pname, val in params.items():
        if pname not in ALL_PARAM_NAMES:
            raise err(f"params.{pname}", f"unknown parameter{_did_you_mean(pname, taken)}; "
                                         f"{' and '.join(kernels)} take{'s' if len(kernels) == 1 else ''}: "
                                         f"{', '.join(taken)}")
        if pname not in taken:
            raise err(f"params.{pname}", f"{' and '.join(kernels)} do{'es' if len(kernels) == 1 else ''} not take "
                                         f"{pname!r}{_did_you_mean(pname, taken)}; parameters: {', '.join(taken)}")
        _check_value(ck, f"params.{pname}", kernels, pname, val)
    for pname, vals in axes.items():
        if pname in ("gpu", "kernel"):
            continue
        if pname not in taken:
            raise err(f"sweep.{pname}", f"{' and '.join(kernels)} do{'es' if len(kernels) == 1 else ''} not take "
                                        f"{pname!r}; parameters: {', '.join(taken)}")
        for i, v in enumerate(vals):
            _check_value(ck, f"sweep.{pname}[{i}]", kernels, pname, v)

    configs, config_hashes = {}, {}
    for i, g in enumerate(gpus):
        if g in configs:
            continue
        try:
            configs[g] = _load_gpu(g)
        except ConfigError as e:
            raise err(f"sweep.gpu[{i}]" if "gpu" in axes else "gpu", str(e)) from None
        config_hashes[g] = configs[g].config_hash()

    names = list(axes)
    points = []
    for combo in itertools.product(*(axes[k] for k in names)):
        d = dict(zip(names, combo))
        gpu = d.pop("gpu", base_gpu)
        kernel = d.pop("kernel", base_kernel)
        p = dict(params)
        p.update(d)
        p = {k: v for k, v in p.items() if KERNELS[kernel].param(k)}
        try:
            resolved = resolve_params(kernel, p)
        except KernelParamError as e:
            raise err(f"params.{e.field}", f"{kernel}: {e}") from None
        points.append(Point(gpu, kernel, resolved, check, fidelity, configs[gpu], max_work))
    param_names = [p for p in ALL_PARAM_NAMES if any(p in pt.params for pt in points)]
    return Scenario(name, src, data, points, param_names, config_hashes, list(overrides or []))


# --------------------------------------------------------------------------- running points
def run_point(point: Point, timeline: bool = False):
    """Simulate one point; never raises: failures become status=error rows."""
    from ..api import simulate

    try:
        r = simulate(point.kernel, point.config or point.gpu, check=point.check, fidelity=point.fidelity,
                     timeline=timeline, max_work=point.max_work, **point.params)
    except Exception as e:  # a failing point is recorded and the sweep goes on
        msg = (f"{type(e).__name__}: {e}".splitlines() or [type(e).__name__])[0]
        return {"status": "error", "reason": msg}, [], None
    row = r.row(list(point.params))
    kernels = [k.row(0) for k in r.kernels]
    return row, kernels, (r if timeline else None)


def _atomic_write(path: Path, text: str):
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def _fmt_secs(s: float) -> str:
    s = int(round(s))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class Progress:
    """A one-line progress bar on stderr (points done, rate, time left); silent when not a terminal."""

    def __init__(self, total: int, enabled: bool | None = None, cached: int = 0, stream=None,
                 min_interval: float = 0.1):
        self.total, self.done, self.cached = total, 0, cached
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.t0 = self._last = time.monotonic()
        self.min_interval = min_interval
        self._drawn = False

    def update(self, n=1):
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        if self.done < self.total and now - self._last < self.min_interval:
            return
        self._last = now
        self.draw()

    def draw(self):
        el = time.monotonic() - self.t0
        rate = self.done / el if el > 0 else 0.0
        if self.done >= self.total:
            left = f"done in {_fmt_secs(el)}"
        else:
            left = f"{_fmt_secs((self.total - self.done) / rate) if rate else '?'} left"
        w = 30
        fill = int(w * self.done / max(1, self.total))
        cached = f" (+{self.cached} saved)" if self.cached else ""
        self.stream.write(f"\r[{'#' * fill}{'.' * (w - fill)}] {self.done}/{self.total} points{cached} "
                          f"{rate:.2f}/s, {left}\x1b[K")
        self.stream.flush()
        self._drawn = True

    def close(self):
        if self.enabled and self._drawn:
            self.stream.write("\n")
            self.stream.flush()


def _worker_init():
    """Pool workers ignore Ctrl-C (the parent stops them), take SIGTERM plainly and die with the parent (Linux)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
        except Exception:
            pass


def _stop_pool(ex):
    """Cancel what has not started and kill the workers (used when the run is interrupted)."""
    procs = list((getattr(ex, "_processes", None) or {}).values())
    for p in procs:
        try:
            p.kill()
        except Exception:
            pass
    ex.shutdown(wait=False, cancel_futures=True)


def _run_pool(points: list, jobs: int, on_done):
    """Run ``points`` in a local process pool; ``on_done(index, result)`` in this process as each finishes."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    ex = ProcessPoolExecutor(max_workers=min(jobs, len(points)), initializer=_worker_init)
    lost, why = 0, ""
    try:
        futs = {ex.submit(run_point, pt): j for j, pt in enumerate(points)}
        for f in as_completed(futs):
            try:
                res = f.result()
            except BrokenProcessPool:
                lost += 1
                why = "a worker process died (killed, out of memory or crashed)"
                continue
            except Exception as e:
                lost += 1
                why = f"{type(e).__name__}: {e}".splitlines()[0]
                continue
            on_done(futs[f], res)
    except BaseException:
        _stop_pool(ex)
        raise
    ex.shutdown(wait=True)
    if lost:
        raise RunError(f"{why}; {lost} point(s) were not computed, every finished point is saved; "
                       f"re-run the same command to compute the rest (--jobs 1 isolates a crashing point)")


def prepare_out(out: Path) -> Path:
    """Create ``out/points`` and check that files can be written there; returns the points folder."""
    pdir = Path(out) / "points"
    try:
        pdir.mkdir(parents=True, exist_ok=True)
        probe = pdir / f".write-test{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise ScenarioError(f"--out {out}: cannot write there: {e.strerror or e}") from None
    return pdir


def run_scenario(sc: Scenario, out: Path, jobs: int | None = None, force: bool = False, executor: str = "local",
                 scheduler: str | None = None, progress: bool | None = None) -> tuple:
    """Run every point (saved ones are skipped unless ``force``), write results.csv, kernels.csv, manifest.json.

    Returns (rows, kernel_rows). A point that fails is an error row; ``RunError`` means points were
    lost to a dead worker; on any exception the finished points are saved and, if this run computed
    any, the CSVs and a manifest with ``"complete": false`` are written."""
    out = Path(out)
    pdir = prepare_out(out)
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    keys = [pt.key(sc.config_hashes[pt.gpu]) for pt in sc.points]
    records = {} if force else _load_saved(sc, pdir, keys)
    todo, seen = [], set(records)
    for i, k in enumerate(keys):
        if k not in seen:
            seen.add(k)
            todo.append(i)
    bar = Progress(len(todo), progress, cached=len(set(keys)) - len(todo))
    computed = 0

    def save(j, res):
        nonlocal computed
        i = todo[j]
        row, krows, _ = res
        text = json.dumps({"point": _point_dict(sc.points[i]), "row": row, "kernels": krows}, sort_keys=True)
        _atomic_write(pdir / f"{keys[i]}.json", text)
        records[keys[i]] = json.loads(text)
        computed += 1
        bar.update()

    def finish(complete: bool):
        rows, krows = collect(sc, records, keys)
        write_csvs(out, sc, rows, krows)
        counts = {}
        for r in rows:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        manifest = {"scenario": sc.data, "overrides": sc.overrides, "source": sc.source,
                    "gpusim_version": __version__, "git_revision": git_revision(), "config_hashes": sc.config_hashes,
                    "points": len(sc.points), "computed": computed, "status_counts": counts,
                    "complete": complete, "missing": len(sc.points) - len(rows), "executor": executor,
                    "started": started, "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        _atomic_write(out / "manifest.json", json.dumps(manifest, indent=2, sort_keys=True, default=str))
        return rows, krows

    points = [sc.points[i] for i in todo]
    try:
        if bar.enabled and todo:
            bar.draw()
        if points and executor == "dask":
            from .executors import run_dask

            run_dask(points, scheduler, save)
        elif (jobs or 1) <= 1 or len(points) <= 1:
            for j, pt in enumerate(points):
                save(j, run_point(pt))
        else:
            _run_pool(points, jobs, save)
    except BaseException:
        bar.close()
        if computed:
            finish(False)
        raise
    bar.close()
    return finish(True)


def _point_dict(pt: Point) -> dict:
    return {"gpu": pt.gpu, "kernel": pt.kernel, "params": pt.params, "check": pt.check, "fidelity": pt.fidelity}


def _load_saved(sc: Scenario, pdir: Path, keys: list) -> dict:
    """Saved points that parse and match their point; anything else is recomputed."""
    records = {}
    for pt, k in zip(sc.points, keys):
        if k in records:
            continue
        try:
            d = json.loads((pdir / f"{k}.json").read_text())
        except (OSError, ValueError):
            continue
        if (isinstance(d, dict) and isinstance(d.get("row"), dict) and isinstance(d.get("kernels"), list)
                and d.get("point") == json.loads(json.dumps(_point_dict(pt)))):
            records[k] = d
    return records


def collect(sc: Scenario, records: dict, keys: list) -> tuple:
    """results.csv and kernels.csv rows, in scenario order, for the points that have a record."""
    rows, krows = [], []
    for pt, k in zip(sc.points, keys):
        d = records.get(k)
        if d is None:
            continue
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
