"""Running a loaded scenario: which points are already saved, computing the rest (here, in a
local process pool or on dask), saving each as it finishes, and writing the CSVs and manifest.

Every finished point is saved under ``OUT/points/KEY.json`` (atomically) with its provenance
(code hash, git revision and dirty flag, config hash); the key hashes everything that determines
the result (``point.Point.key``), so re-running skips finished points, an interrupted sweep
loses nothing, and a changed model or GPU config never serves old numbers. Each point file
carries a checksum of its content (``point.point_text``); on a re-run a file that cannot be parsed,
has no checksum or fails it, or whose result breaks physics (``physics.row_violations``, checked
again on the saved numbers) is recomputed, and the run prints one line saying so. An ``OUT``
holding another scenario's results is refused unless ``force``, which removes them first.
"""
from __future__ import annotations

import errno
import json
import os
import stat
import sys
import time
from pathlib import Path

from .. import provenance
from ..result import KERNEL_COLUMNS, METRIC_COLUMNS
from .envelope import monotone
from .errors import SaveError, ScenarioError
from .executors import DASK_TIMEOUT_S, run_dask, run_pool
from .point import check_record, point_dict, point_text, run_point
from ..yamlio import read_at_most
from .progress import Progress

OUTPUT_FILES = ("results.csv", "kernels.csv", "manifest.json")


def cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cap_jobs(jobs: int | None) -> tuple:
    """(worker processes to use, a warning or None): more workers than cores only adds overhead."""
    n = cores()
    if jobs is None:
        return n, None
    if jobs > n:
        return n, f"--jobs {jobs} is more than the {n} core(s) here; using {n}"
    return jobs, None


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file and a rename: readers see the old file or
    the new one, never a part. On any failure the temporary file is removed; an ``OSError`` (a
    full disk, permissions) becomes a one-line ``SaveError``."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except BaseException as e:
        try:
            tmp.unlink()
        except OSError:
            pass
        if not isinstance(e, OSError):
            raise
        full = "; the disk is full" if e.errno == errno.ENOSPC else ""
        raise SaveError(f"{path}: cannot write: {e.strerror or e}{full}; every point finished before is saved, "
                        f"re-run the same command to resume") from None


def prepare_out(out: Path) -> Path:
    """Create ``out/points`` and check that files can be written there; returns the points folder."""
    pdir = Path(out) / "points"
    if pdir.is_symlink():
        raise ScenarioError(f"--out {out}: {pdir} is a symlink; gpusim writes only inside --out, remove it")
    try:
        pdir.mkdir(parents=True, exist_ok=True)
        probe = pdir / f".write-test{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise ScenarioError(f"--out {out}: cannot write there: {e.strerror or e}") from None
    return pdir


MAX_MANIFEST_BYTES = 1 << 26       # a manifest lists each point's wall time: ~10 bytes a point


def read_small(p: Path, cap: int) -> str:
    """The text of ``p`` if it is a regular file of at most ``cap`` bytes; ``OSError`` otherwise
    (a FIFO, a device or a symlink to one is refused before it is opened: reading never blocks or
    grows past ``cap``), ``ValueError`` if it is not UTF-8."""
    st = os.stat(p)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "not a regular file", str(p))
    if st.st_size > cap:
        raise OSError(errno.EFBIG, f"larger than {cap} bytes", str(p))
    data = read_at_most(p, cap)
    if len(data) > cap:
        raise OSError(errno.EFBIG, f"larger than {cap} bytes", str(p))
    return data.decode("utf-8")


def _manifest(out: Path):
    """The parsed manifest of ``out``; None when there is none or it cannot be read (a manifest that
    is a FIFO, a device, a symlink to one or huge is never opened or read whole)."""
    try:
        return json.loads(read_small(Path(out) / "manifest.json", MAX_MANIFEST_BYTES))
    except (OSError, ValueError, RecursionError):
        return None


def _owner(out: Path) -> tuple | None:
    """(scenario name, source) of the results in ``out``, from its manifest; None if there are none."""
    m = _manifest(out)
    if not isinstance(m, dict):
        return None
    data = m.get("scenario") if isinstance(m.get("scenario"), dict) else {}
    src = str(m.get("source", ""))
    return m.get("scenario_name") or data.get("name") or Path(src).stem, src


def claim_out(out: Path, sc, force: bool = False) -> list:
    """Make sure ``out`` holds no other scenario's results. If it does: refuse (``ScenarioError``),
    or with ``force`` remove them (saved points, CSVs, manifest and the files it lists) and return
    what was removed, as short descriptions."""
    out = Path(out)
    owner = _owner(out)
    if owner is None or owner[0] == sc.name:
        return []
    if not force:
        raise ScenarioError(f"--out {out} holds the results of scenario {owner[0]!r} ({owner[1]}), not {sc.name!r}; "
                            f"choose another --out, or add --force to remove them")
    removed = []
    if (out / "points").is_symlink():
        raise ScenarioError(f"--out {out}: {out / 'points'} is a symlink; --force removes files only inside --out")
    pts = list((out / "points").glob("*.json"))
    for f in pts:
        f.unlink()
    if pts:
        removed.append(f"{len(pts)} saved point(s)")
    m = _manifest(out)
    listed = m.get("files", []) if isinstance(m, dict) else []
    listed = listed if isinstance(listed, list) else []
    for name in dict.fromkeys(list(OUTPUT_FILES) + [str(x) for x in listed]):
        f = out / name
        if "/" not in name and f.is_file() and not f.is_symlink():
            f.unlink()
            removed.append(name)
    return removed


def note_files(out: Path, paths: list) -> None:
    """Add files written next to the results (plots, timelines) to the manifest's ``files``, so a
    later ``--force`` run of another scenario removes them too."""
    m = Path(out) / "manifest.json"
    d = _manifest(out)
    if not isinstance(d, dict) or not isinstance(d.get("files", []), list):
        return
    names = [Path(p).name for p in paths if Path(p).parent == Path(out)]
    d["files"] = list(dict.fromkeys(d.get("files", []) + names))
    atomic_write(m, json.dumps(d, indent=2, sort_keys=True, default=str))


def run_scenario(sc, out: Path, jobs: int | None = None, force: bool = False, executor: str = "local",
                 scheduler: str | None = None, progress: bool | None = None,
                 dask_timeout: float = DASK_TIMEOUT_S, notify=None) -> tuple:
    """Run every point (saved ones are skipped unless ``force``), write results.csv, kernels.csv, manifest.json.
    ``notify`` gets one line per saved point that is recomputed because it fails its checks
    (default: printed to stderr).

    Returns (rows, kernel_rows). A point that fails is an error row; ``RunError`` means points were
    lost to a dead worker; on any exception the finished points are saved and, if this run computed
    any, the CSVs and a manifest with ``"complete": false`` are written."""
    out = Path(out)
    pdir = prepare_out(out)
    claim_out(out, sc, force)
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    prov = provenance.record()
    keys = [pt.key() for pt in sc.points]
    records = {} if force else _load_saved(sc, pdir, keys, prov["code_hash"], notify or _print_note)
    todo = _missing(keys, records)
    computed = 0

    def save(j, res):
        nonlocal computed
        i = todo[j]
        row, krows, _ = res
        pt = sc.points[i]
        rec = {"point": point_dict(pt), "row": row, "kernels": krows, "scenario": sc.name,
               "config_hash": pt.config_hash, "provenance": prov}
        text = point_text(rec)
        atomic_write(pdir / f"{keys[i]}.json", text)
        records[keys[i]] = json.loads(text)
        computed += 1
        bar.update()

    def finish(complete: bool):
        rows, krows = collect(sc, records, keys)
        if complete or computed:
            write_csvs(out, sc, rows, krows)
        manifest = _new_manifest(sc, prov, rows, computed=computed, complete=complete, executor=executor,
                                 started=started)
        atomic_write(out / "manifest.json", json.dumps(manifest, indent=2, sort_keys=True, default=str))
        return rows, krows

    finish(False)                     # claims ``out`` for this scenario before any work starts
    points = [sc.points[i] for i in todo]
    bar = Progress(len(todo), progress, cached=len(set(keys)) - len(todo))
    try:
        _execute(points, save, executor=executor, jobs=jobs, scheduler=scheduler, dask_timeout=dask_timeout)
    except BaseException:
        bar.close()
        if computed:
            try:
                finish(False)
            except SaveError:
                pass                  # the original error says why; the saved points are intact
        raise
    bar.close()
    return finish(True)


def _missing(keys: list, records: dict) -> list:
    """Indices of the points to compute: the first of each key that no saved record answers."""
    todo, seen = [], set(records)
    for i, k in enumerate(keys):
        if k not in seen:
            seen.add(k)
            todo.append(i)
    return todo


def _new_manifest(sc, prov: dict, rows: list, *, computed: int, complete: bool, executor: str, started: str) -> dict:
    """manifest.json of a run: the scenario, the code and configs that ran it, its counts and wall times."""
    counts = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return {"scenario": sc.data, "scenario_name": sc.name, "overrides": sc.overrides, "source": sc.source,
            "gpusim_version": prov["gpusim_version"], "git_revision": prov["git_revision"],
            "git_dirty": prov["git_dirty"], "code_hash": prov["code_hash"],
            "config_hashes": sc.config_hashes, "gpu_override_fields": sc.gpu_override_fields,
            "points": len(sc.points), "computed": computed, "status_counts": counts,
            "complete": complete, "missing": len(sc.points) - len(rows), "executor": executor,
            "started": started, "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "wall_times": wall_times(rows)}


def _execute(points: list, save, *, executor: str, jobs, scheduler, dask_timeout: float) -> None:
    """Compute ``points`` in this process, a process pool or on dask; ``save(j, result)`` for each."""
    fn = run_point                    # looked up at call time, so tests can replace it
    if points and executor == "dask":
        run_dask(points, scheduler, save, no_worker_timeout=dask_timeout, fn=fn)
    elif (jobs or 1) <= 1 or len(points) <= 1:
        for j, pt in enumerate(points):
            save(j, fn(pt))
    else:
        run_pool(points, jobs, save, fn=fn)


STATUSES = ("ok", "mismatch", "unphysical", "infeasible", "error")
MAX_POINT_FILE_BYTES = 1 << 24      # a point file is a few KB; a larger one is not read
MAX_NOTE = 300                      # characters of the reason in a "recomputing" line


def _print_note(line: str) -> None:
    print(f"gpusim: {line}", file=sys.stderr)


def _printable(text) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def _load_saved(sc, pdir: Path, keys: list, code_hash: str, notify=_print_note) -> dict:
    """Saved points whose file passes its checksum, matches its point, was computed by this code
    and holds a physical result. A point file that exists but fails any of these is recomputed,
    with one line to ``notify`` saying why; a missing one silently."""
    records, told = {}, set()
    for pt, k in zip(sc.points, keys):
        if k in records or k in told:
            continue
        f = pdir / f"{k}.json"
        try:
            if f.is_symlink():
                raise OSError(errno.EINVAL, "a symlink, not a regular file")
            if not f.exists():
                continue
            d, why = check_record(read_small(f, MAX_POINT_FILE_BYTES))
        except (OSError, UnicodeDecodeError) as e:
            d, why = None, f"point file cannot be read ({getattr(e, 'strerror', None) or e})"
        if d is not None:
            why = _record_problem(pt, d, code_hash)
        if why:
            told.add(k)
            why = why if len(why) <= MAX_NOTE else why[:MAX_NOTE - 3] + "..."
            notify(f"recomputing point {k} ({_printable(pt.kernel)} on {_printable(pt.gpu)}): {_printable(why)}")
            continue
        records[k] = d
    return records


def _record_problem(pt, d: dict, code_hash: str) -> str | None:
    """Why a checksummed point record cannot be served for ``pt``, or None."""
    if not (isinstance(d.get("row"), dict) and isinstance(d.get("kernels"), list)
            and d.get("point") == json.loads(json.dumps(point_dict(pt), default=str))
            and d.get("config_hash") == pt.config_hash
            and (d.get("provenance") or {}).get("code_hash") == code_hash):
        return "point file does not match its point"
    if d["row"].get("status") not in STATUSES:
        return f"point file has an unknown status {str(d['row'].get('status'))[:40]!r}"
    from .. import physics

    wl = _workload(pt) if d["row"].get("status") in ("ok", "mismatch") else None
    why = physics.row_violations(d["row"], d["kernels"], pt.config, pt.params, wl)
    return f"cached result breaks physics: {'; '.join(why)}" if why else None


def _workload(pt):
    """The workload of ``pt`` (for its compulsory bytes), or None when it cannot be built."""
    try:
        from ..kernels import resolve_kernel

        return resolve_kernel(pt.kernel_ref or pt.kernel).build(pt.params)
    except Exception:
        return None


def collect(sc, records: dict, keys: list) -> tuple:
    """results.csv and kernels.csv rows, in scenario order, for the points that have a record; the
    points of a what-if sweep monotone in every GPU field (``envelope``)."""
    rows, krows, pts = [], [], []
    for pt, k in zip(sc.points, keys):
        d = records.get(k)
        if d is None:
            continue
        pts.append(pt)
        row = {"gpu": pt.gpu, "kernel": pt.kernel}
        for n in sc.param_names:
            row[n] = pt.params.get(n, "")
        for f in sc.gpu_override_fields:
            row[f"gpu.{f}"] = pt.gpu_overrides.get(f, "")
        for c in METRIC_COLUMNS:
            row[c] = d["row"].get(c, "")
        rows.append(row)
        for kr in d["kernels"]:
            kr = dict(kr)
            kr["point"] = len(rows) - 1
            krows.append(kr)
    return monotone(pts, rows, list(getattr(sc, "gpu_override_fields", None) or [])), krows


WALL_COLUMNS = ("sim_wall_s",)     # wall times: in the manifest, so that results.csv is the same on every run


def gpu_field_columns(sc) -> list:
    """The columns of the GPU fields a scenario changes (``--set gpu.X``, ``gpu_overrides``, a
    ``gpu.<field>`` sweep, zipped or not): ``gpu.<field>``, one per field, holding its value."""
    return [f"gpu.{f}" for f in getattr(sc, "gpu_override_fields", None) or []]


def result_columns(sc) -> list:
    """results.csv's columns: gpu, kernel, the parameters, a ``gpu.<field>`` column per GPU field
    the scenario changes, then the metrics (less the wall times, which go to the manifest:
    ``wall_times``)."""
    return (["gpu", "kernel"] + sc.param_names + gpu_field_columns(sc)
            + [c for c in METRIC_COLUMNS if c not in WALL_COLUMNS])


def wall_times(rows: list) -> dict:
    """The manifest's wall times: each row's (results.csv order) and their sum, in seconds."""
    per = {c: [r.get(c, "") for r in rows] for c in WALL_COLUMNS}
    return {**per, **{f"{c}_total": round(sum(x for x in v if isinstance(x, (int, float))), 4) for c, v in per.items()}}


def write_csvs(out: Path, sc, rows: list, krows: list):
    import csv
    import io

    for name, header, data in (("results.csv", result_columns(sc), rows), ("kernels.csv", list(KERNEL_COLUMNS), krows)):
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=header, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        for r in data:
            w.writerow({k: _fmt(r.get(k, "")) for k in header})
        atomic_write(Path(out) / name, buf.getvalue())


def _fmt(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):           # a dict-valued GPU field (per-dtype rates): one JSON cell
        return json.dumps(v, sort_keys=True)
    return v
