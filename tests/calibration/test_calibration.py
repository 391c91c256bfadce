"""The calibration layer: tree evaluation, the switch, fitted vs transferred, the physics floor,
extrapolation, and the shipped file against its training set."""
import dataclasses
import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

import gpusim
from gpusim import calibration as calib
from gpusim.calibration import features as F
from gpusim.calibration import model as M
from gpusim.hardware import load_gpu

ROOT = Path(__file__).resolve().parents[2]


def stump(feature: int, threshold: float, left: float, right: float, baseline: float = 0.0) -> dict:
    return {"baseline": baseline, "trees": [{"feature": [feature, 0, 0], "threshold": [threshold, 0, 0],
                                             "left": [1, 0, 0], "right": [2, 0, 0], "value": [0.0, left, right],
                                             "is_leaf": [0, 1, 1]}]}


def test_trees_follow_their_splits():
    t = M.Trees(stump(1, 0.5, -0.2, 0.3, baseline=0.1))
    got = t.predict(np.array([[0.0, 0.4], [9.0, 0.6], [0.0, 0.5]]))
    assert got == pytest.approx([-0.1, 0.4, -0.1])
    assert [t.predict_one(x) for x in ([0.0, 0.4], [9.0, 0.6], [0.0, 0.5])] == pytest.approx(got)


def test_one_point_walks_every_tree_as_the_batch_does():
    two = {"baseline": 0.0, "trees": stump(0, 1.0, 1.0, 2.0)["trees"] + stump(1, 5.0, 10.0, 20.0)["trees"]
           + [{"feature": [0], "threshold": [0.0], "left": [0], "right": [0], "value": [0.5], "is_leaf": [1]}]}
    t = M.Trees(two)
    X = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 9.0], [3.0, 7.0]])
    assert t.predict(X) == pytest.approx([11.5, 12.5, 21.5, 22.5])
    assert [t.predict_one(x) for x in X] == pytest.approx(t.predict(X))


def synthetic(tmp_path, cfg, g_fitted: float, g_transferred: float, ranges=None) -> Path:
    """A calibration file whose models add a constant log factor (a stump on num_warps)."""
    names, struct = list(F.FEATURES), list(F.STRUCTURE)
    w = names.index("num_warps")
    rng = ranges or {n: [-1e9, 1e9] for n in names}
    one = stump(0, 1e9, 1.0, 1.0)             # every point's difficulty 1: the quantiles as they are
    d = {"fitted": {"features": names, "model": stump(w, 1e9, g_fitted, g_fitted), "scale": one},
         "gpus": {cfg.name: {"quantiles": {"pooled": [-0.1, 0.2]}, "ranges": {"pooled": rng},
                             "config_hash": cfg.config_hash()}},
         "transferred": {"features": struct, "model": stump(0, 1e9, g_transferred, g_transferred), "scale": one,
                         "quantiles": {"pooled": [-0.3, 0.4]}, "ranges": {"pooled": {n: [-1e9, 1e9] for n in struct}}},
         "limit_log": math.log(4.0), "training_hash": "x"}
    p = tmp_path / "cal.json"
    p.write_text(json.dumps(d))
    return p


@pytest.fixture
def h100():
    return load_gpu("h100")


POINT = dict(kernel="rmsnorm", rows=64, cols=1024)


def run(cfg, monkeypatch, path=None, **kw):
    if path is not None:
        monkeypatch.setattr(M, "DATA", path)
    return gpusim.simulate(POINT["kernel"], cfg, check=False, rows=POINT["rows"], cols=POINT["cols"], **kw)


def test_off_gives_the_mechanistic_time_exactly(h100, monkeypatch, tmp_path):
    path = synthetic(tmp_path, h100, 0.2, 0.1)
    on = run(h100, monkeypatch, path)
    off = run(h100, monkeypatch, path, calibration="off")
    assert off.calibration == "off" and off.time_us == off.time_us_sim == on.time_us_sim
    assert on.calibration == "fitted" and on.time_us == pytest.approx(on.time_us_sim * math.exp(0.2))
    lo, hi = on.time_us_lo, on.time_us_hi
    assert lo == pytest.approx(on.time_us * math.exp(-0.1)) and hi == pytest.approx(on.time_us * math.exp(0.2))


def test_a_what_if_config_is_transferred_and_stays_monotone(h100, monkeypatch, tmp_path):
    path = synthetic(tmp_path, h100, 0.2, 0.1)
    faster = h100.model_copy(update={"hbm_read_bandwidth_bytes_per_s": h100.hbm_read_bandwidth_bytes_per_s * 1.5})
    a, b = run(h100, monkeypatch, path), run(faster, monkeypatch, path)
    assert b.calibration == "transferred"
    assert b.calibration_factor == pytest.approx(math.exp(0.1))     # structure features: no resource moves them
    c = run(faster.model_copy(update={"hbm_read_bandwidth_bytes_per_s": faster.hbm_read_bandwidth_bytes_per_s * 1.5}),
            monkeypatch, path)
    # the same factor: the calibrated times order as the mechanistic ones do (whose monotonicity
    # tests/test_whatif_* hold)
    assert c.calibration_factor == pytest.approx(b.calibration_factor)
    assert c.time_us / b.time_us == pytest.approx(c.time_us_sim / b.time_us_sim)
    assert a.calibration == "fitted"


def test_transferred_asked_for_on_a_fitted_config_applies_the_transferred_model(h100, monkeypatch, tmp_path):
    # what a what-if sweep asks for on every point, its unchanged one included
    path = synthetic(tmp_path, h100, 0.2, 0.1)
    t = run(h100, monkeypatch, path, calibration="transferred")
    assert t.calibration == "transferred" and t.calibration_factor == pytest.approx(math.exp(0.1))
    assert t.time_us == pytest.approx(t.time_us_sim * math.exp(0.1))


def test_no_correction_goes_below_the_busiest_resource(h100, monkeypatch, tmp_path):
    path = synthetic(tmp_path, h100, -math.log(4.0), 0.0)
    r = run(h100, monkeypatch, path)
    u = max(r.utilisation().values())
    assert u <= 1 + 1e-6 and r.status == "ok"
    assert r.time_us >= r.time_us_sim / 4 * (1 - 1e-9)


def test_outside_the_training_range_the_correction_shrinks(h100, monkeypatch, tmp_path):
    rng = {n: [-1e9, 1e9] for n in F.FEATURES}
    rng["num_warps"] = [100.0, 200.0]            # this point's 4 warps lie far outside
    path = synthetic(tmp_path, h100, 0.2, 0.1, ranges=rng)
    r = run(h100, monkeypatch, path)
    assert r.calibration == "fitted, extrapolated"
    assert r.calibration_factor == pytest.approx(math.exp(0.2 * M.EXTRAPOLATE_SHRINK))
    assert math.log(r.time_us_hi / r.time_us) == pytest.approx(0.2 * M.EXTRAPOLATE_WIDEN)


def test_a_bound_config_is_never_calibrated(monkeypatch, tmp_path):
    cfg = load_gpu("h100")
    path = synthetic(tmp_path, cfg, 0.2, 0.1)
    ideal = cfg.model_copy(update={"name": "h100-ideal"})
    r = run(ideal, monkeypatch, path)
    assert r.calibration == "off" and r.time_us == r.time_us_sim


def test_features_are_finite_and_named(h100):
    r = gpusim.simulate("matmul", h100, check=False, calibration="off", M=256, N=256, K=256)
    f = F.features(F.breakdown(r, gpusim.kernels.build("matmul", r.params)), r.params)
    assert list(f) == list(F.FEATURES)
    assert all(math.isfinite(v) for v in f.values())


def test_structure_sees_alignment_and_work_per_thread():
    odd = F.workload_structure(gpusim.kernels.build("elementwise_fused", {"n": 1001, "BLOCK": 1024, "num_warps": 1}))
    even = F.workload_structure(gpusim.kernels.build("elementwise_fused", {"n": 1024, "BLOCK": 1024, "num_warps": 4}))
    assert odd["align_bytes"] == 2 and even["align_bytes"] == 16
    assert odd["elems_per_thread"] == 4 * even["elems_per_thread"] == 64


def test_structure_sees_register_pressure():
    small = F.workload_structure(gpusim.kernels.build("matmul", {"M": 512, "N": 512, "K": 512, "BLOCK_M": 64,
                                                                 "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4}))
    big = F.workload_structure(gpusim.kernels.build("matmul", {"M": 512, "N": 512, "K": 512, "BLOCK_M": 256,
                                                               "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 4}))
    assert big["acc_per_thread"] == 16 * small["acc_per_thread"] == 512     # 256x256 fp32 over 128 threads
    assert small["registers"] < 255 < big["registers"]                     # the big tile spills
    ew = F.workload_structure(gpusim.kernels.build("elementwise_fused", {"n": 1024, "BLOCK": 1024, "num_warps": 4}))
    assert ew["acc_per_thread"] == 1.0 and ew["registers"] >= 1


@pytest.mark.slow
def test_compiled_counts_see_narrow_copies_and_are_unknown_without_the_compiler(monkeypatch):
    pytest.importorskip("triton")
    monkeypatch.setenv("GPUSIM_RESOURCES", "auto")
    cfg = load_gpu("h100")
    odd = F.compiled_structure(gpusim.kernels.build("elementwise_fused", {"n": 1001, "BLOCK": 1024, "num_warps": 1}), cfg)
    even = F.compiled_structure(gpusim.kernels.build("elementwise_fused", {"n": 1024, "BLOCK": 1024, "num_warps": 1}), cfg)
    assert odd["narrow_accesses"] > 0 == even["narrow_accesses"]              # odd rows: 2-byte accesses
    assert odd["global_accesses"] > even["global_accesses"] > 0
    monkeypatch.setenv("GPUSIM_RESOURCES", "estimated")
    wl = gpusim.kernels.build("elementwise_fused", {"n": 1024, "BLOCK": 1024, "num_warps": 1})
    assert F.compiled_structure(wl, cfg) is None
    f = F.structure({}, [], F.workload_structure(wl, cfg))
    assert all(f[f"log2_sass_{k}"] == -1.0 for k in F.COMPILED)


def test_bad_mode_is_one_line():
    with pytest.raises(ValueError, match="calibration must be .on., .off. or .transferred."):
        gpusim.simulate("rmsnorm", "h100", calibration="maybe", rows=8, cols=64)


def _fitter():
    spec = importlib.util.spec_from_file_location("fit_calibration", ROOT / "benchmarks" / "fit_calibration.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(not M.DATA.exists(), reason="no calibration shipped")
def test_shipped_file_matches_its_training_set():
    fit = _fitter()
    shipped = json.loads(M.DATA.read_text())
    data = fit.train_rows(list(shipped["gpus"]) or ["h100", "h200"])
    assert fit.training_hash(data) == shipped["training_hash"]
    assert not any(fit.sealed(r[0]) for rows in data.values() for r in rows)
    for g, m in shipped["gpus"].items():
        assert m["n"] == len(data[g])
        assert m["config_hash"] == load_gpu(g).config_hash(), f"configs/{g}.yaml changed since the fit: refit"


@pytest.mark.slow
@pytest.mark.skipif(not M.DATA.exists(), reason="no calibration shipped")
def test_refitting_reproduces_the_shipped_file():
    pytest.importorskip("sklearn")
    assert _fitter().main(["check"]) == 0


def test_no_calibrated_time_before_its_launch_has_started(monkeypatch, tmp_path):
    cfg = load_gpu("h100")
    path = synthetic(tmp_path, cfg, -2.0, -2.0)            # a factor of 1/4 (the limit) on every point
    r = run(cfg, monkeypatch, path)
    k = r.kernels[-1]
    fixed = k.start_us + cfg.sync_overhead_us              # launch overhead, then the sync after the run
    assert r.time_us_sim / 4 < fixed                        # the factor alone would end before that
    assert r.time_us == pytest.approx(fixed) and r.time_us_lo >= r.time_us - 1e-9
