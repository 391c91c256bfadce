"""Scenario runs: sweep expansion, --set, point keys, saving and resuming (after Ctrl-C or a
SIGKILL), parallel and dask execution giving byte-identical CSVs, the manifest, the progress bar,
and failures (a raising point, a dying worker) that never lose finished points."""
import csv
import datetime
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import dataclasses
import io

import gpusim
from gpusim.cli import main
from gpusim.hardware import load_gpu
from gpusim.sweep import runner
from gpusim.sweep.progress import Progress
from gpusim.sweep.runner import run_scenario
from gpusim.sweep.scenario import load_scenario
from gpusim.sweep.yamlio import apply_set

REPO = Path(__file__).resolve().parents[2]
_real_run_point = runner.run_point


def _write(tmp_path, text, name="s.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def _ew_sweep(tmp_path, ns, kernel="elementwise_fused", check="auto", name="ew.yaml"):
    return _write(tmp_path, f"name: ew\nkernel: {kernel}\nsweep: {{n: [{', '.join(map(str, ns))}]}}\n"
                            f"check: {check}\n", name)


def _csvs(out):
    """results.csv and kernels.csv, as bytes (wall times are in the manifest, not in them)."""
    return (Path(out) / "results.csv").read_bytes(), (Path(out) / "kernels.csv").read_bytes()


def _manifest(out):
    return json.loads((Path(out) / "manifest.json").read_text())


def _run(argv, capsys=None):
    rc = main(argv)
    if capsys is not None:
        capsys.readouterr()
    return rc


# --------------------------------------------------------------------------- loading
def test_sweep_is_a_cartesian_product_with_per_kernel_params(tmp_path):
    p = _write(tmp_path, "gpu: h100\nparams: {batch: 1, heads: 2, BLOCK_M: 64}\n"
                         "sweep: {kernel: [attention_naive, attention_flash], seq_len: [256, 512, 1024]}\n")
    sc = load_scenario(p)
    assert len(sc.points) == 6
    assert [(pt.kernel, pt.params["seq_len"]) for pt in sc.points[:3]] == \
        [("attention_naive", 256), ("attention_naive", 512), ("attention_naive", 1024)]
    naive, flash = sc.points[0], sc.points[3]
    assert "BLOCK_M" not in naive.params and flash.params["BLOCK_M"] == 64
    assert flash.params["head_dim"] == 64            # defaults are filled in
    assert sc.param_names[:4] == ["batch", "heads", "seq_len", "head_dim"]
    assert set(sc.config_hashes) == {"h100"} and sc.config_hashes["h100"] == load_gpu("h100").config_hash()


def test_apply_set():
    data = {"kernel": "attention_flash", "params": {"seq_len": 4096}, "sweep": None}
    out = apply_set(data, ["params.head_dim=128", "gpu=a100", "sweep.seq_len=[512,1024]", "check=false",
                           "name=x=y"])
    assert out == {"kernel": "attention_flash", "gpu": "a100", "check": False, "name": "x=y",
                   "params": {"seq_len": 4096, "head_dim": 128}, "sweep": {"seq_len": [512, 1024]}}
    assert data == {"kernel": "attention_flash", "params": {"seq_len": 4096}, "sweep": None}  # not modified


def test_set_reaches_points(tmp_path):
    p = _write(tmp_path, "kernel: attention_flash\nparams: {seq_len: 4096}\nsweep: {BLOCK_M: [64, 128]}\n")
    sc = load_scenario(p, ["params.head_dim=128", "gpu=a100", "sweep.seq_len=[512,1024]"])
    assert len(sc.points) == 4
    assert {pt.gpu for pt in sc.points} == {"a100"}
    assert {pt.params["head_dim"] for pt in sc.points} == {128}
    assert sorted({pt.params["seq_len"] for pt in sc.points}) == [512, 1024]
    assert sc.overrides == ["params.head_dim=128", "gpu=a100", "sweep.seq_len=[512,1024]"]


def test_keys_follow_point_config_and_version(tmp_path, monkeypatch):
    p = _write(tmp_path, "kernel: elementwise_fused\nsweep: {n: [1024, 2048], gpu: [h100, h200]}\n")
    a, b = load_scenario(p), load_scenario(p)
    keys = [pt.key() for pt in a.points]
    assert keys == [pt.key() for pt in b.points]       # stable
    assert len(set(keys)) == 4
    pt = a.points[0]
    assert pt.config_hash == load_gpu(pt.gpu).config_hash()
    assert dataclasses.replace(pt, config_hash="another-config").key() != keys[0]
    monkeypatch.setattr(gpusim, "__version__", "999")
    assert pt.key() != keys[0]


# --------------------------------------------------------------------------- progress
def test_progress_bar_when_enabled():
    stream = io.StringIO()
    bar = Progress(4, enabled=True, cached=2, stream=stream)
    for _ in range(4):
        bar.update()
    bar.close()
    err = stream.getvalue()
    assert "\r" in err and "4/4" in err and "+2 saved" in err and "point/s" in err
    assert err.endswith("\n")


def test_progress_lines_off_a_terminal():
    """Not a terminal: one line each time another 10% of the points is done."""
    stream = io.StringIO()
    bar = Progress(40, stream=stream)
    for _ in range(40):
        bar.update()
    bar.close()
    lines = stream.getvalue().splitlines()
    assert [x.split()[1] for x in lines] == [f"{4 * k}/40" for k in range(1, 11)]
    assert "\r" not in stream.getvalue() and lines[-1].startswith("gpusim: 40/40 points (100%)")


def test_progress_bar_with_the_process_pool(tmp_path, capsys):
    p = _ew_sweep(tmp_path, [1024, 2048, 3072])
    run_scenario(load_scenario(p), tmp_path / "out", jobs=2, progress=True)
    err = capsys.readouterr().err
    assert "0/3" in err and "3/3" in err


def test_progress_silent_when_disabled(capsys):
    bar = Progress(3, enabled=False)
    bar.update()
    bar.close()
    assert capsys.readouterr().err == ""


# --------------------------------------------------------------------------- running, saving, resuming
def test_manifest(tmp_path):
    p = _write(tmp_path, "name: man\nkernel: elementwise_fused\nsweep: {n: [1024, 2048], gpu: [h100, a100]}\n")
    sc = load_scenario(p, ["params.BLOCK=256"])
    out = tmp_path / "out"
    rows, krows = run_scenario(sc, out, jobs=1)
    m = _manifest(out)
    assert m["scenario"]["params"] == {"BLOCK": 256} and m["scenario"]["sweep"]["gpu"] == ["h100", "a100"]
    assert m["overrides"] == ["params.BLOCK=256"] and m["source"] == str(p)
    assert m["gpusim_version"] == gpusim.__version__
    assert m["config_hashes"] == {g: load_gpu(g).config_hash() for g in ("h100", "a100")}
    assert m["points"] == 4 and m["computed"] == 4 and m["complete"] is True and m["missing"] == 0
    assert m["status_counts"] == {"ok": 4}
    t0 = datetime.datetime.strptime(m["started"], "%Y-%m-%dT%H:%M:%S%z")
    t1 = datetime.datetime.strptime(m["finished"], "%Y-%m-%dT%H:%M:%S%z")
    assert t0 <= t1
    git = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True)
    if git.returncode == 0:
        assert m["git_revision"] == git.stdout.strip()
    assert len(rows) == 4 and len(krows) == 4


def test_saved_points_are_skipped_and_force_recomputes(tmp_path, monkeypatch):
    p = _ew_sweep(tmp_path, [1024, 2048, 4096])
    out = tmp_path / "out"
    run_scenario(load_scenario(p), out, jobs=1)
    first = _csvs(out)
    calls = []
    monkeypatch.setattr(runner, "run_point", lambda pt: calls.append(pt) or _real_run_point(pt))
    run_scenario(load_scenario(p), out, jobs=1)
    assert calls == [] and _manifest(out)["computed"] == 0 and _csvs(out) == first
    # a longer sweep only computes the new point
    p2 = _ew_sweep(tmp_path, [1024, 2048, 4096, 8192], name="ew2.yaml")
    run_scenario(load_scenario(p2), out, jobs=1)
    assert [pt.params["n"] for pt in calls] == [8192] and _manifest(out)["computed"] == 1
    calls.clear()
    run_scenario(load_scenario(p), out, jobs=1, force=True)
    assert len(calls) == 3 and _manifest(out)["computed"] == 3 and _csvs(out) == first


def test_corrupt_saved_point_is_recomputed(tmp_path):
    p = _ew_sweep(tmp_path, [1024, 2048])
    out = tmp_path / "out"
    run_scenario(load_scenario(p), out, jobs=1)
    first = _csvs(out)
    victim = sorted((out / "points").glob("*.json"))[0]
    victim.write_text('{"point": {"gpu"')
    run_scenario(load_scenario(p), out, jobs=1)
    assert _manifest(out)["computed"] == 1 and _csvs(out) == first
    json.loads(victim.read_text())


def test_200_point_sweep_in_parallel_then_from_saved_points(tmp_path, capsys):
    """--jobs 2 over 200 points; the same command again only reads the saved points."""
    p = _ew_sweep(tmp_path, [256 * (k + 1) for k in range(200)])
    out = tmp_path / "out"
    argv = ["run", str(p), "--out", str(out), "--jobs", "2", "--no-plots"]
    assert _run(argv, capsys) == 0
    first = _csvs(out)
    assert len(list((out / "points").glob("*.json"))) == 200
    assert _manifest(out)["computed"] == 200
    assert _run(argv, capsys) == 0
    assert _manifest(out)["computed"] == 0
    assert _csvs(out) == first
    rows = list(csv.DictReader(open(out / "results.csv")))
    assert len(rows) == 200 and {r["status"] for r in rows} == {"ok"}
    assert [int(r["n"]) for r in rows] == [256 * (k + 1) for k in range(200)]


def test_same_scenario_twice_gives_identical_csvs(tmp_path, capsys):
    p = _write(tmp_path, "params: {batch: 1, heads: 2, head_dim: 32}\n"
                         "sweep: {kernel: [attention_naive, attention_flash], seq_len: [128, 384]}\n")
    assert _run(["run", str(p), "--out", str(tmp_path / "a"), "--jobs", "1", "--no-plots"], capsys) == 0
    assert _run(["run", str(p), "--out", str(tmp_path / "b"), "--jobs", "2", "--no-plots"], capsys) == 0
    assert _csvs(tmp_path / "a") == _csvs(tmp_path / "b")        # byte for byte: no wall time in them
    rows = list(csv.DictReader(open(tmp_path / "a" / "results.csv")))
    assert all(r["max_rel_err"] for r in rows)         # small enough to be checked against numpy
    assert "sim_wall_s" not in rows[0]
    # the wall times went to the manifest, one per row of results.csv, and their sum
    for run in ("a", "b"):
        w = _manifest(tmp_path / run)["wall_times"]
        assert len(w["sim_wall_s"]) == len(rows) == 4 and all(t > 0 for t in w["sim_wall_s"])
        assert w["sim_wall_s_total"] == pytest.approx(sum(w["sim_wall_s"]), abs=1e-3)


def _raise_for_n_3072(kernel, gpu, **kw):
    if kw.get("n") == 3072:
        raise RuntimeError("injected failure\nsecond line")
    return _real_simulate(kernel, gpu, **kw)


_real_simulate = gpusim.api.simulate


def test_a_raising_point_is_an_error_row_and_the_sweep_goes_on(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(gpusim.api, "simulate", _raise_for_n_3072)     # inherited by the forked workers
    p = _ew_sweep(tmp_path, [1024, 2048, 3072, 4096, 5120])
    out = tmp_path / "out"
    assert _run(["run", str(p), "--out", str(out), "--jobs", "2", "--no-plots"], capsys) == 1
    rows = list(csv.DictReader(open(out / "results.csv")))
    assert [r["status"] for r in rows] == ["ok", "ok", "error", "ok", "ok"]
    assert rows[2]["reason"] == "RuntimeError: injected failure"
    m = _manifest(out)
    assert m["complete"] is True and m["status_counts"] == {"ok": 4, "error": 1}


def _die_on_n_5120(pt, timeline=False):
    if pt.params.get("n") == 5120:
        os._exit(3)
    return _real_run_point(pt, timeline)


def test_a_dying_worker_keeps_finished_points(tmp_path, monkeypatch, capsys):
    p = _ew_sweep(tmp_path, [1024, 2048, 3072, 4096, 5120, 6144])
    out = tmp_path / "out"
    monkeypatch.setattr(runner, "run_point", _die_on_n_5120)
    assert _run(["run", str(p), "--out", str(out), "--jobs", "2", "--no-plots"]) == 1
    err = capsys.readouterr().err
    assert "worker process died" in err and "re-run the same command" in err and "Traceback" not in err
    saved = list((out / "points").glob("*.json"))
    for f in saved:
        json.loads(f.read_text())
    if saved:
        m = _manifest(out)
        assert m["complete"] is False and m["computed"] == len(saved) and m["missing"] == 6 - len(saved)
    monkeypatch.setattr(runner, "run_point", _real_run_point)
    assert _run(["run", str(p), "--out", str(out), "--jobs", "2", "--no-plots"], capsys) == 0
    assert _manifest(out)["computed"] == 6 - len(saved)
    clean = tmp_path / "clean"
    assert _run(["run", str(p), "--out", str(clean), "--jobs", "1", "--no-plots"], capsys) == 0
    assert _csvs(out) == _csvs(clean)


def test_sigkill_loses_no_finished_point(tmp_path, capsys):
    """Kill -9 a serial run part-way; the saved points are valid and a re-run computes only the rest."""
    ns = [(1 << 20) + 1024 * k for k in range(12)]
    p = _ew_sweep(tmp_path, ns, kernel="elementwise_chain", check="false")
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "gpusim", "run", str(p), "--out", str(out), "--jobs", "1",
                             "--no-plots"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while len(list((out / "points").glob("*.json"))) < 3:
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.time() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    saved = list((out / "points").glob("*.json"))
    assert 3 <= len(saved) < len(ns)
    for f in saved:
        d = json.loads(f.read_text())
        assert d["row"]["status"] == "ok"
    assert _run(["run", str(p), "--out", str(out), "--jobs", "1", "--no-plots"], capsys) == 0
    assert _manifest(out)["computed"] == len(ns) - len(saved)
    clean = tmp_path / "clean"
    assert _run(["run", str(p), "--out", str(clean), "--jobs", "2", "--no-plots"], capsys) == 0
    assert _csvs(out) == _csvs(clean)


def test_interrupt_keeps_finished_points(tmp_path, monkeypatch, capsys):
    """Ctrl-C (KeyboardInterrupt) in the middle of a sweep: what finished is saved and in the CSVs."""
    p = _ew_sweep(tmp_path, [1024, 2048, 3072, 4096])

    def interrupt_third(pt, timeline=False):
        if pt.params["n"] == 3072:
            raise KeyboardInterrupt
        return _real_run_point(pt, timeline)

    monkeypatch.setattr(runner, "run_point", interrupt_third)
    out = tmp_path / "out"
    assert main(["run", str(p), "--out", str(out), "--jobs", "1", "--no-plots"]) == 130
    assert "re-run the same command to resume" in capsys.readouterr().err
    m = _manifest(out)
    assert m["complete"] is False and m["computed"] == 2 and m["missing"] == 2
    assert len(list(csv.DictReader(open(out / "results.csv")))) == 2
    monkeypatch.setattr(runner, "run_point", _real_run_point)
    assert _run(["run", str(p), "--out", str(out), "--jobs", "1", "--no-plots"], capsys) == 0
    assert _manifest(out)["computed"] == 2 and _manifest(out)["complete"] is True


# --------------------------------------------------------------------------- dask
CLUSTER = """
import sys
from distributed import LocalCluster

if __name__ == "__main__":
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as c:
        print(c.scheduler_address, flush=True)
        sys.stdin.read()
"""


@pytest.mark.slow      # a dask cluster and a gpusim process (6 s of CPU); test_cli covers an unreachable scheduler
def test_dask_matches_local_byte_for_byte(tmp_path, capsys):
    pytest.importorskip("dask", reason="dask is not installed (pip install 'gpusim[dask]')")
    pytest.importorskip("distributed", reason="dask.distributed is not installed (pip install 'gpusim[dask]')")
    p = _write(tmp_path, "params: {batch: 1, heads: 2, head_dim: 32}\n"
                         "sweep: {kernel: [attention_naive, attention_flash], seq_len: [128, 256]}\n")
    local = tmp_path / "local"
    assert _run(["run", str(p), "--out", str(local), "--jobs", "2", "--no-plots"], capsys) == 0
    cluster = subprocess.Popen([sys.executable, "-c", CLUSTER], cwd=REPO, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        address = cluster.stdout.readline().strip()
        assert address.startswith("tcp://"), address
        remote = tmp_path / "dask"
        r = subprocess.run([sys.executable, "-m", "gpusim", "run", str(p), "--out", str(remote), "--executor", "dask",
                            "--scheduler", address, "--no-plots"], cwd=REPO, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
    finally:
        cluster.stdin.close()
        try:
            cluster.wait(timeout=30)
        except subprocess.TimeoutExpired:
            cluster.kill()
    assert _csvs(remote) == _csvs(local)
    assert _manifest(remote)["executor"] == "dask" and _manifest(remote)["computed"] == 4
    assert sorted(f.name for f in (remote / "points").glob("*.json")) == \
        sorted(f.name for f in (local / "points").glob("*.json"))
