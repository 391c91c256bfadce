"""gpusim tune / gpusim.tune: the search space a spec declares, the ranking, the indistinguishable
count, and the pruning function for triton.autotune (called on triton.Config look-alikes)."""
from types import SimpleNamespace

import pandas as pd
import pytest

from gpusim.cli import main
from gpusim.tune import TuneError, indistinguishable, overlap_note, overlaps_best, prune_configs, rank, search_space


def test_search_space_from_the_spec():
    sp = search_space("matmul")
    assert sp["BLOCK_M"] == (32, 64, 128, 256) and sp["num_warps"] == (4, 8) and sp["num_stages"] == (2, 3, 4)
    assert "M" not in sp and "dtype" not in sp
    assert 0 in search_space("rmsnorm")["BLOCK"]                 # the default (whole row) stays a candidate
    assert search_space("matmul", {"BLOCK_M": [64]})["BLOCK_M"] == (64,)


@pytest.mark.parametrize("space, msg", [({"M": [64]}, "not a tunable"), ({"BLOCK_M": [48]}, "must be one of")])
def test_bad_space_is_an_error(space, msg):
    with pytest.raises(TuneError, match=msg):
        search_space("matmul", space)


def test_indistinguishable():
    r = pd.DataFrame({"time_us": [10.0, 10.3, 10.49, 12.0]})
    assert indistinguishable(r, 5.0) == 3 and indistinguishable(r, 1.0) == 1


def test_overlaps_best_marks_intervals_that_meet_the_best():
    r = pd.DataFrame({"time_us": [10.0, 12.0, 20.0, 11.0], "time_us_lo": [8.0, 10.5, 17.0, 7.0],
                      "time_us_hi": [11.0, 15.0, 25.0, 7.5]})
    # [10.5, 15] meets [8, 11]; [17, 25] starts after 11; [7, 7.5] ends before 8
    assert overlaps_best(r) == [True, True, False, False]
    r["overlaps_best"] = overlaps_best(r)
    assert overlap_note(r).startswith("1 of the other 3 configs have a 90% interval overlapping the best's "
                                      "(overlaps_best): indistinguishable from the best within the 90% intervals.")
    alone = r.assign(overlaps_best=[True, False, False, False])
    assert "the best is ahead within the 90% intervals" in overlap_note(alone)
    bound = pd.DataFrame({"time_us": [10.0, 11.0], "time_us_lo": [None, None], "time_us_hi": ["", ""]})
    bound["overlaps_best"] = overlaps_best(bound)                 # an -ideal config: no intervals, no note
    assert list(bound.overlaps_best) == [None, None] and overlap_note(bound) == ""


def test_cli_ranking_shows_the_overlap(capsys):
    assert main(["tune", "elementwise_fused", "--set", "n=65536", "--space", "BLOCK=[128,4096]", "num_warps=[4]",
                 "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["rank", "BLOCK", "num_warps", "time_us", "time_us_lo", "time_us_hi",
                                           "overlaps_best", "tflops", "bound"]
    assert "indistinguishable from the best within the 90% intervals" in out or "ahead within the 90%" in out


def _cfg(block, warps):
    return SimpleNamespace(kwargs={"BLOCK": block, "UNUSED": 1}, num_warps=warps, num_stages=2)


def test_prune_keeps_the_predicted_fastest():
    shape = {"n": 1 << 16}
    configs = [_cfg(128, 4), _cfg(4096, 4), _cfg(1024, 8)]
    prune = prune_configs("elementwise_fused", shape, "h100", top_k=2)
    kept = prune(configs, {})
    assert len(kept) == 2 and all(c in configs for c in kept)
    ranking = rank("elementwise_fused", "h100", shape, {"BLOCK": [128, 4096, 1024], "num_warps": [4, 8]})
    times = {(r.BLOCK, r.num_warps): r.time_us for r in ranking.itertuples()}
    by_pred = sorted(configs, key=lambda c: times[(c.kwargs["BLOCK"], c.num_warps)])
    assert kept == by_pred[:2]
    assert list(ranking.time_us) == sorted(ranking.time_us) and list(ranking["rank"]) == list(range(1, 7))
    assert list(ranking.overlaps_best)[0] is True and len(ranking.overlaps_best) == 6


def test_cli_bad_space_exits_2(capsys):
    assert main(["tune", "matmul", "--space", "BLOCK_M=[48]"]) == 2
    assert "BLOCK_M must be one of" in capsys.readouterr().err


def test_cli_prints_and_saves_each_configs_interval(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUSIM_RESOURCES", "estimated")     # no compile: a quick test
    assert main(["tune", "softmax", "--gpu", "h200", "--set", "rows=64", "cols=1024",
                 "--space", "num_warps=[4,8]", "BLOCK=[0]", "--jobs", "1", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "time_us_lo" in out.splitlines()[0] and "time_us_hi" in out.splitlines()[0]
    import pandas as pd
    df = pd.read_csv(tmp_path / "tune.csv")
    df = df[df.status == "ok"]
    assert len(df) and ((df.time_us_lo < df.time_us) & (df.time_us < df.time_us_hi)).all()


# ---------------------------------------------------------------- the lower bound and the pruned search
import random  # noqa: E402

from gpusim.api import simulate_workload  # noqa: E402
from gpusim.hardware import load_gpu  # noqa: E402
from gpusim.kernels import resolve_kernel  # noqa: E402
from gpusim.lower_bound import lower_bound  # noqa: E402
from gpusim.sweep.errors import RunError  # noqa: E402
from gpusim.tune_search import search  # noqa: E402
from gpusim.tune_store import FILE, TuneStore  # noqa: E402

# shapes a user tunes, small enough to simulate in a test (the slow test draws larger ones)
SHAPES = {
    "matmul": [dict(M=512, N=512, K=512), dict(M=2048, N=1024, K=4096, dtype="bf16"), dict(M=1000, N=768, K=512)],
    "attention_flash": [dict(batch=1, heads=4, seq_len=1024, head_dim=64),
                        dict(batch=2, heads=8, seq_len=2048, head_dim=128, causal=True)],
    "softmax": [dict(rows=256, cols=4096)], "layernorm": [dict(rows=512, cols=2048)],
    "rmsnorm": [dict(rows=1024, cols=4096)], "elementwise_fused": [dict(n=1 << 20)],
    "gemv_splitk": [dict(M=8, N=4096, K=4096)], "attention_decode": [dict(batch=4, heads=32, kv_len=4096)],
}


def _sample(n: int, seed: int, gpus=("h100", "h200", "a100")) -> list:
    """``n`` random (kernel, gpu, params) points: a shape of ``SHAPES`` and random tunables."""
    from gpusim.tune import search_space

    rng, out = random.Random(seed), []
    names = sorted(SHAPES)
    while len(out) < n:
        name = names[len(out) % len(names)]
        sp = search_space(name)
        params = {**rng.choice(SHAPES[name]), **{p: rng.choice(v) for p, v in sp.items()}}
        out.append((name, rng.choice(gpus), params))
    return out


def _bound_and_time(name, gpu, params):
    k, cfg = resolve_kernel(name), load_gpu(gpu)
    try:
        wl = k.build(k.resolve(params))
    except ValueError:
        return None
    b, r = lower_bound(wl, cfg), simulate_workload(wl, cfg, check=False)
    return b, r


def _check_bound(points):
    checked = 0
    for name, gpu, params in points:
        got = _bound_and_time(name, gpu, params)
        if got is None:
            continue
        b, r = got
        if b.infeasible:       # the bound's infeasible reason is the simulation's, word for word
            assert r.status == "infeasible" and r.reason == b.infeasible, (name, gpu, params)
        elif r.status == "ok":     # the bound bounds the simulated (mechanistic) time
            t = getattr(r, "time_us_sim", None) or r.time_us
            assert b.time_us <= t, (name, gpu, params, b, t)
            checked += 1
    return checked


def test_lower_bound_is_below_the_simulated_time():
    pts = [("matmul", "h200", dict(M=256, N=256, K=512, BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, num_warps=4,
                                   num_stages=3)),
           ("softmax", "a100", dict(rows=256, cols=4096, BLOCK=1024, num_warps=4)),
           ("matmul", "h100", dict(M=512, N=512, K=512, BLOCK_M=256, BLOCK_N=256, BLOCK_K=256, num_warps=8,
                                   num_stages=4))]
    assert _check_bound(pts) == 2
    b, _ = _bound_and_time(*pts[2])
    assert "KiB of SRAM per CTA" in b.infeasible


@pytest.mark.slow
def test_lower_bound_holds_on_a_random_sample():
    """The bound the search prunes with is below the simulated time on random configs of every
    kernel family and GPU (a config it wrongly pruned could have been the best)."""
    assert _check_bound(_sample(64, seed=1)) >= 40


class _FakeStore:
    def __init__(self, saved=None):
        self.saved, self.rows = [], dict(saved or {})

    def load(self, points):
        return dict(self.rows)

    def save(self, point, row):
        self.saved.append(point)


TIMES = [10.0, 12.0, 30.0, 9.3, 50.0, 9.0]
BOUNDS = {0: 8.0, 1: 9.6, 2: 20.0, 3: 9.2, 4: 40.0, 5: 8.5}


def _fake_run(i):
    return {"status": "ok", "time_us": TIMES[i]}, [], None


@pytest.mark.parametrize("jobs", [1, 2])
def test_search_prunes_only_what_cannot_come_near_the_best(jobs):
    res = search(list(range(6)), BOUNDS, _FakeStore(), jobs=jobs, margin=0.05, fn=_fake_run)
    best = min(r["time_us"] for r in res.rows.values())
    assert best == min(TIMES) and len(res.rows) + len(res.pruned) == 6
    # every config whose bound is within 5% of the best is simulated; every pruned one is beyond
    assert all(i in res.rows for i, b in BOUNDS.items() if b <= best * 1.05)
    assert all(BOUNDS[i] > best * 1.05 for i in res.pruned) and {2, 4} <= set(res.pruned)
    if jobs == 1:       # in bound order: 0 and 5 set the best (9.0), 3 is within 5%, 1 is not
        assert sorted(res.rows) == [0, 3, 5] and sorted(res.pruned) == [1, 2, 4]
    every = search(list(range(6)), BOUNDS, _FakeStore(), prune=False, fn=_fake_run)
    assert sorted(every.rows) == list(range(6)) and every.pruned == []


def _boom_after(n, times):
    calls = []

    def run(pt):
        if len(calls) == n:
            raise KeyboardInterrupt
        calls.append(pt)
        return {"status": "ok", "time_us": times[pt]}, [], None
    return run, calls


class _Pt:
    """A stand-in for sweep.point.Point: a key and a point dict."""

    def __init__(self, i):
        self.i = i

    def key(self):
        return f"k{self.i}"


def test_interrupted_search_resumes_from_the_store(tmp_path, monkeypatch):
    monkeypatch.setattr("gpusim.tune_store.point_dict", lambda pt: {"i": pt.i})
    pts = [_Pt(i) for i in range(5)]
    times = {p: 10.0 + p.i for p in pts}
    bounds = {i: 1.0 for i in range(5)}
    run, calls = _boom_after(2, times)
    with pytest.raises(KeyboardInterrupt):
        search(pts, bounds, TuneStore(tmp_path), fn=run)
    assert len(calls) == 2 and len((tmp_path / FILE).read_text().splitlines()) == 2
    with open(tmp_path / FILE, "a") as f:
        f.write('{"key": "k4", "cut short')             # a line a kill left half-written
    run2, calls2 = _boom_after(99, times)
    res = search(pts, bounds, TuneStore(tmp_path), fn=run2)
    assert res.cached == 2 and len(calls2) == 3 and {c.i for c in calls + calls2} == set(range(5))
    assert {i: r["time_us"] for i, r in res.rows.items()} == {i: 10.0 + i for i in range(5)}
    assert TuneStore(tmp_path).load(pts).keys() == set(range(5))   # the cut line did not spoil the next


def _die(pt):
    import os
    os._exit(3)


def test_a_dead_worker_stops_the_search_with_a_clear_error():
    with pytest.raises(RunError, match="worker process died"):
        search([0, 1], {0: 1.0, 1: 2.0}, _FakeStore(), jobs=2, fn=_die)


def test_cli_lists_infeasible_configs_with_their_reason(tmp_path, capsys):
    assert main(["tune", "matmul", "--set", "M=256", "N=256", "K=256", "--space", "BLOCK_M=[64,256]",
                 "BLOCK_N=[64]", "BLOCK_K=[64,256]", "num_warps=[4]", "num_stages=[2,4]", "--jobs", "1",
                 "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "infeasible" in out and "KiB of SRAM per CTA" in out
    df = pd.read_csv(tmp_path / "tune.csv")
    bad = df[df.status == "infeasible"]
    assert len(bad) >= 1 and bad.reason.str.contains("SRAM per CTA").all()
    ok = df[df.status == "ok"]
    assert (ok.lower_bound_us <= ok.time_us_sim.fillna(ok.time_us)).all()      # the simulated time
    assert (tmp_path / FILE).exists()
    assert main(["tune", "matmul", "--set", "M=256", "N=256", "K=256", "--space", "BLOCK_M=[64,256]",
                 "BLOCK_N=[64]", "BLOCK_K=[64,256]", "num_warps=[4]", "num_stages=[2,4]", "--jobs", "1",
                 "--out", str(tmp_path)]) == 0
    assert "saved from an earlier run" in capsys.readouterr().out


def test_cli_out_that_is_a_file_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    f = tmp_path / "taken"
    f.write_text("x")
    monkeypatch.setattr("gpusim.tune.rank", lambda *a, **k: pytest.fail("simulated before checking --out"))
    assert main(["tune", "matmul", "--out", str(f)]) == 2
    assert "not a directory" in capsys.readouterr().err


@pytest.mark.slow
def test_ctrl_c_keeps_every_finished_config_and_the_rerun_resumes(tmp_path):
    """gpusim tune in a subprocess, interrupted with SIGINT once some configs are saved: exit 130,
    one line, the saved configs kept; the same command then simulates only the rest. ``--no-prune``:
    every config is simulated, so plenty is left when the signal comes (with pruning, a loaded
    machine could finish the last few configs before it arrived)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    argv = [sys.executable, "-m", "gpusim", "tune", "matmul", "--set", "M=1024", "N=1024", "K=1024",
            "--space", "BLOCK_K=[32,64]", "num_stages=[2,3]", "--jobs", "2", "--no-prune", "--out", str(tmp_path)]
    env = dict(os.environ, GPUSIM_RESOURCES="estimated")
    # SIGINT back to its default in the child: a test run started in the background (a shell without job
    # control) ignores SIGINT, the child would inherit that, Python would install no KeyboardInterrupt
    # handler and the tune would run to the end (exit 0)
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    saved = tmp_path / FILE
    deadline = time.time() + 300
    while time.time() < deadline and (not saved.exists() or len(saved.read_text().splitlines()) < 3):
        time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert "interrupted; finished points are saved" in err and "Traceback" not in err
    kept = len(saved.read_text().splitlines())
    assert kept >= 3
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert f"({kept} saved from an earlier run)" in done.stdout


def test_a_calibrated_ranking_widens_the_pruning_threshold():
    from gpusim.tune_search import prune_above

    plain = {0: {"status": "ok", "time_us": 10.0}, 1: {"status": "ok", "time_us": 12.0}, 2: {"status": "error"}}
    assert prune_above(plain, 0.05) == pytest.approx(10.5)
    # calibrated rows: 9.0 ranked (simulated 10.0) and 9.6 (simulated 12.0, factor 0.8): a pruned config's
    # ranked time is at least 0.8 x its bound, so only bounds above 9.0 x 1.05 / 0.8 are pruned
    cal = {0: {"status": "ok", "time_us": 9.0, "time_us_sim": 10.0}, 1: {"status": "ok", "time_us": 9.6, "time_us_sim": 12.0}}
    assert prune_above(cal, 0.05) == pytest.approx(9.0 * 1.05 / 0.8)
    assert prune_above({}, 0.05) == float("inf")


def _fake_limited(i):
    """A fake simulation of TIMES[i] us that stops where the search's time limit says so."""
    from gpusim.backends.sim import time_limit as tl

    s = tl.stop_cycles(1.0)                  # seconds at a 1 Hz clock
    if s is not None and TIMES[i] * 1e-6 > s:
        tl.stop()
        return {"status": "error", "reason": "Stopped"}, [], None
    return {"status": "ok", "time_us": TIMES[i]}, [], None


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_config_whose_simulation_passes_the_best_is_stopped_and_pruned(jobs):
    bounds = {i: 1.0 for i in range(6)}                # no bound prunes: every config starts
    res = search(list(range(6)), bounds, _FakeStore(), jobs=jobs, margin=0.05, fn=_fake_limited)
    best = min(r["time_us"] for r in res.rows.values())
    assert best == min(TIMES) and len(res.rows) + len(res.pruned) == 6
    assert set(res.stopped) <= set(res.pruned)
    # stopped only past the best so far x 1.05, with that limit as its proven bound
    for i, limit in res.stopped.items():
        assert TIMES[i] > limit >= best * 1.05
    # every config within 5% of the best ran to the end: the head of the ranking is unchanged
    assert all(i in res.rows for i, t in enumerate(TIMES) if t <= best * 1.05)
    if jobs == 1:       # in order: 10, 12 (> 10.5: stopped), 30 and 9.3 ... each against the best so far
        assert sorted(res.rows) == [0, 3, 5] and sorted(res.stopped) == [1, 2, 4]
    every = search(list(range(6)), bounds, _FakeStore(), prune=False, fn=_fake_limited)
    assert sorted(every.rows) == list(range(6)) and not every.stopped


def test_configs_likely_to_spill_run_last_and_are_stopped_at_the_best():
    from gpusim.backends.sim import time_limit as tl

    times, ran = {0: 100.0, 1: 5.5, 2: 50.0}, []

    def run(i):
        ran.append(i)
        s = tl.stop_cycles(1.0)
        if s is not None and times[i] * 1e-6 > s:
            tl.stop()
            return {"status": "error", "reason": "Stopped"}, [], None
        return {"status": "ok", "time_us": times[i]}, [], None

    bounds = {0: 1.0, 1: 5.0, 2: 6.0}      # 0's bound leaves its spills out: lowest, yet slowest
    res = search([0, 1, 2], bounds, _FakeStore(), fn=run, late={0})
    assert ran == [1, 0] and list(res.rows) == [1]
    assert res.stopped == {0: pytest.approx(5.5 * 1.05)} and sorted(res.pruned) == [0, 2]
    ran.clear()
    first = search([0, 1, 2], bounds, _FakeStore(), fn=run)        # in bound order 0 runs to its end
    assert ran == [0, 1] and sorted(first.rows) == [0, 1] and first.pruned == [2]


def test_spill_prone_flags_only_accumulators_past_the_register_cap():
    from gpusim.hardware import load_gpu
    from gpusim.kernels import resolve_kernel
    from gpusim.tune_search import spill_prone

    k, cfg = resolve_kernel("matmul"), load_gpu("h100")

    def wl(bm, bn, w):
        return k.build(k.resolve(dict(M=1024, N=1024, K=1024, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=32, num_warps=w)))
    assert spill_prone(wl(256, 256, 4), cfg) and spill_prone(wl(128, 256, 4), cfg)
    assert not spill_prone(wl(128, 256, 8), cfg) and not spill_prone(wl(64, 64, 4), cfg)
