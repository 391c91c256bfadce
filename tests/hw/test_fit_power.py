"""The power model's fields in configs/h200.yaml are what benchmarks/fit_power.py fits from the
recorded clock microbenchmarks (data/h200/micro/clock_probe_micro.json), and h100
carries the same (derived), while the a100 configs have none."""
import importlib.util
import json
from pathlib import Path

import pytest

from gpusim.hardware import load_gpu

ROOT = Path(__file__).resolve().parents[2]


def _fit_power():
    spec = importlib.util.spec_from_file_location("fit_power", ROOT / "benchmarks" / "fit_power.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_h200_power_fields_are_the_fit_of_the_recorded_microbenchmarks():
    fp = _fit_power()
    cfg = load_gpu("h200")
    r = fp.fit(cfg, json.loads(fp.PROBE.read_text()))
    assert cfg.idle_power_w == pytest.approx(r["idle_power_w"], abs=0.01)
    assert set(cfg.activity_energy_j) == set(r["activity_energy_j"])
    for k, v in r["activity_energy_j"].items():
        assert cfg.activity_energy_j[k] == pytest.approx(v, rel=1e-3), k
    assert cfg.dvfs_energy_exponent == pytest.approx(r["dvfs_energy_exponent"], abs=1e-3)
    assert cfg.tensor_flops_per_s["fp16"] == pytest.approx(r["tensor_fp16_at_fmax"], rel=1e-5)
    # every energy is positive and the exponent near the C V^2 f value of 2
    assert all(v > 0 for v in cfg.activity_energy_j.values())
    assert 1.5 < cfg.dvfs_energy_exponent < 3.5


def test_named_configs_power_model():
    h200, h100 = load_gpu("h200"), load_gpu("h100")
    assert h100.power_limit_w == h200.power_limit_w == 700.0
    assert h100.activity_energy_j == h200.activity_energy_j
    for name in ("a100", "a100-80gb", "h100-ideal", "h200-ideal"):
        assert load_gpu(name).power_limit_w is None, name
