"""Runs that end badly end cleanly: a full disk (one line, exit 2, no temporary files left),
SIGTERM during a point or during shutdown (exit 143, finished points kept, no traceback), a dask
cluster without workers (gives up after --dask-timeout), --jobs above the core count."""
import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpusim.cli import main
from gpusim.sweep import runner

REPO = Path(__file__).resolve().parents[2]
_real_run_point = runner.run_point


def _write(tmp_path, text, name="s.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def _no_temporary_files(out):
    left = [str(f) for f in Path(out).rglob("*") if ".tmp" in f.name]
    assert left == [], left


def test_full_disk_while_saving_a_point(tmp_path, monkeypatch, capsys):
    p = _write(tmp_path, "kernel: elementwise_fused\nsweep: {n: [1024, 2048, 4096]}\n")
    out = tmp_path / "out"
    real = Path.write_text
    saved = []

    def write_text(self, data, *a, **k):
        if ".tmp" in self.name and self.parent.name == "points":
            if saved:                                   # the second point: the disk is full
                real(self, data[:7], *a, **k)           # a part is written, then the write fails
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            saved.append(self)
        return real(self, data, *a, **k)

    monkeypatch.setattr(Path, "write_text", write_text)
    rc = main(["run", str(p), "--out", str(out), "--jobs", "1", "--no-plots"])
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith("gpusim: error")]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert "No space left on device" in lines[0] and "disk is full" in lines[0] and "points/" in lines[0]
    _no_temporary_files(out)
    pts = list((out / "points").glob("*.json"))
    assert len(pts) == 1 and json.loads(pts[0].read_text())["row"]["status"] == "ok"
    monkeypatch.setattr(Path, "write_text", real)
    assert main(["run", str(p), "--out", str(out), "--jobs", "1", "--no-plots"]) == 0
    assert json.loads((out / "manifest.json").read_text())["computed"] == 2


def test_full_disk_while_writing_the_csvs(tmp_path, monkeypatch, capsys):
    p = _write(tmp_path, "kernel: elementwise_fused\nparams: {n: 1024}\n")
    out = tmp_path / "out"
    real = Path.write_text

    def write_text(self, data, *a, **k):
        if self.name.startswith(".results.csv.tmp"):
            real(self, "", *a, **k)                     # a zero-byte file, then the failure
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, data, *a, **k)

    monkeypatch.setattr(Path, "write_text", write_text)
    assert main(["run", str(p), "--out", str(out), "--jobs", "1", "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert "results.csv: cannot write: No space left on device" in err and "Traceback" not in err
    _no_temporary_files(out)
    assert len(list((out / "points").glob("*.json"))) == 1


def test_sigterm_during_shutdown_is_ignored(tmp_path, monkeypatch, capsys):
    """SIGTERM stops the run; a second SIGTERM while it saves and writes the manifest changes nothing."""
    p = _write(tmp_path, "kernel: elementwise_fused\nsweep: {n: [1024, 2048, 4096, 8192]}\n")
    out = tmp_path / "out"

    def term_on_third(pt, timeline=False):
        if pt.params["n"] == 4096:
            os.kill(os.getpid(), signal.SIGTERM)
        return _real_run_point(pt, timeline)

    real_write = runner.write_csvs

    def write_csvs(*a, **k):
        os.kill(os.getpid(), signal.SIGTERM)        # arrives during shutdown
        return real_write(*a, **k)

    monkeypatch.setattr(runner, "run_point", term_on_third)
    monkeypatch.setattr(runner, "write_csvs", write_csvs)
    assert main(["run", str(p), "--out", str(out), "--jobs", "1", "--no-plots"]) == 143
    err = capsys.readouterr().err
    assert "Traceback" not in err and "re-run the same command to resume" in err
    m = json.loads((out / "manifest.json").read_text())
    assert m["complete"] is False and m["computed"] == 2
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN      # main() restored the handler
    _no_temporary_files(out)


@pytest.mark.slow
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_sigterm_during_a_long_point_keeps_finished_points(tmp_path, jobs):
    """Two short points, then one that takes many seconds: SIGTERM while it runs ends the run
    promptly (exit 143), keeps the finished points, and leaves a manifest saying what is missing."""
    p = _write(tmp_path, "kernel: elementwise_chain\ncheck: false\n"
                         "sweep: {n: [1048576, 1049600, 67108864]}\n")
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "gpusim", "run", str(p), "--out", str(out), "--jobs", jobs,
                             "--no-plots"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while len(list((out / "points").glob("*.json"))) < 2:
            assert proc.poll() is None, "the run ended before it could be stopped"
            assert time.time() < deadline
            time.sleep(0.05)
        time.sleep(0.5)                              # the long point is running now
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=30)[1]        # generous: it takes well under 2 s
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert "Traceback" not in err and "re-run the same command to resume" in err
    saved = list((out / "points").glob("*.json"))
    assert len(saved) == 2 and all(json.loads(f.read_text())["row"]["status"] == "ok" for f in saved)
    m = json.loads((out / "manifest.json").read_text())
    assert m["complete"] is False and m["computed"] == 2 and m["missing"] == 1
    _no_temporary_files(out)


SCHEDULER_ONLY = """
import sys
from distributed import LocalCluster

if __name__ == "__main__":
    with LocalCluster(n_workers=0, dashboard_address=":0") as c:
        print(c.scheduler_address, flush=True)
        sys.stdin.read()
"""


@pytest.mark.slow
def test_dask_without_workers_times_out(tmp_path):
    pytest.importorskip("distributed", reason="dask.distributed is not installed")
    p = _write(tmp_path, "kernel: elementwise_fused\nsweep: {n: [1024, 2048]}\n")
    cluster = subprocess.Popen([sys.executable, "-c", SCHEDULER_ONLY], cwd=REPO, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        address = cluster.stdout.readline().strip()
        assert address.startswith("tcp://"), address
        r = subprocess.run([sys.executable, "-m", "gpusim", "run", str(p), "--out", str(tmp_path / "o"),
                            "--scheduler", address, "--dask-timeout", "2", "--no-plots"], cwd=REPO,
                           capture_output=True, text=True, timeout=120)
    finally:
        cluster.stdin.close()
        try:
            cluster.wait(timeout=30)
        except subprocess.TimeoutExpired:
            cluster.kill()
    assert r.returncode == 1, r.stderr
    assert "no worker alive" in r.stderr and "for 2 s" in r.stderr and "2 point(s) were not computed" in r.stderr
    assert "Traceback" not in r.stderr


def test_jobs_capped_at_the_core_count(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(runner, "cores", lambda: 2)
    assert runner.cap_jobs(None) == (2, None) and runner.cap_jobs(2) == (2, None)
    p = _write(tmp_path, "kernel: elementwise_fused\nsweep: {n: [1024, 2048]}\n")
    assert main(["run", str(p), "--out", str(tmp_path / "o"), "--jobs", "64", "--no-plots"]) == 0
    err = capsys.readouterr().err
    assert "warning: --jobs 64 is more than the 2 core(s) here; using 2" in err
    assert "on 2 process(es)" in err


def test_bad_dask_timeout(tmp_path, capsys):
    p = _write(tmp_path, "kernel: elementwise_fused\nparams: {n: 1024}\n")
    with pytest.raises(SystemExit) as e:
        main(["run", str(p), "--dask-timeout", "0"])
    assert e.value.code == 2 and "--dask-timeout" in capsys.readouterr().err
