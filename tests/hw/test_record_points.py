"""The recorder (benchmarks/record_points.py) without a GPU: numpy execution stands in for the GPU
(``--cpu``), so the pipeline itself (workers prepare inputs and references ahead, the timing process
checks each point, flash backward is checked later in a worker) is tested end to end."""
import importlib.util
import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCEN = [str(ROOT / "tests" / "data" / "record_points" / f) for f in ("small.yaml", "bwd.yaml")]


def _recorder(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))     # the pool's workers import it by name
    spec = importlib.util.spec_from_file_location("record_points", ROOT / "benchmarks" / "record_points.py")
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "record_points", mod)
    spec.loader.exec_module(mod)
    return mod


def _records(out: Path) -> list:
    return [json.loads(line) for line in (out / "measured.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_recorder_checks_every_point_and_keeps_no_time_for_a_wrong_one(tmp_path, monkeypatch):
    rp = _recorder(monkeypatch)
    assert rp.main(["--cpu", "--jobs", "1", "--budget-s", "60", "--out", str(tmp_path / "a"), *SCEN]) == 0
    recs = _records(tmp_path / "a")
    assert sorted((r["kernel"], r["point"]) for r in recs) == [("attention_flash_bwd", 0), ("matmul", 0), ("matmul", 1)]
    for r in recs:
        assert r["status"] == "ok" and r["measured_us"] > 0 and r["max_rel_err"] <= r["tolerance"], r
    # a second run skipping the first's points records nothing
    assert rp.main(["--cpu", "--jobs", "1", "--budget-s", "60", "--out", str(tmp_path / "b"),
                    "--skip", str(tmp_path / "a" / "measured.jsonl"), *SCEN]) == 0
    assert not (tmp_path / "b" / "measured.jsonl").read_text()
    # outputs off by 2x: every point (the late-checked backward too) is a wrong result with no time
    real = rp._run_on_cpu
    monkeypatch.setattr(rp, "_run_on_cpu", lambda wl, x, names, *a: (
        {n: 2 * np.asarray(v) for n, v in real(wl, x, names)[0].items()}, 1.0))
    assert rp.main(["--cpu", "--jobs", "1", "--budget-s", "60", "--out", str(tmp_path / "c"), *SCEN]) == 0
    recs = _records(tmp_path / "c")
    assert len(recs) == 3
    for r in recs:
        assert r["status"] == "wrong-result" and "measured_us" not in r, r



def _spin():
    while True:
        pass


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_workers_are_stopped_while_a_point_is_timed_and_continue_after(monkeypatch):
    import multiprocessing as mp
    from types import SimpleNamespace

    rp = _recorder(monkeypatch)
    workers = [mp.get_context("fork").Process(target=_spin, daemon=True) for _ in range(2)]
    for w in workers:
        w.start()
    try:
        rec = SimpleNamespace(pool=SimpleNamespace(_pool=workers))
        with rp.Recorder.quiet(rec):
            assert all(rp._stopped(w.pid) for w in workers)
        t_end = time.time() + 2.0             # SIGCONT is asynchronous too
        while time.time() < t_end and any(rp._stopped(w.pid) for w in workers):
            time.sleep(0.001)
        assert not any(rp._stopped(w.pid) for w in workers)
    finally:
        for w in workers:
            w.kill()
