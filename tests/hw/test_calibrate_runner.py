"""``gpusim calibrate --ops`` without a GPU: which stages run and in what order, a failing stage
recorded without losing the others, the SM clock taken from the driver or else the config, and
the command refusing to run without CUDA."""
import json

import pytest

from gpusim.cli import main
from gpusim.hardware import load_gpu
from gpusim.hw.calibrate import driver, ops, runner


@pytest.fixture
def fake_ops(monkeypatch):
    calls = []
    monkeypatch.setattr(ops, "measure_launch", lambda: calls.append("launch") or {"launch_overhead_us": 1.4})
    monkeypatch.setattr(ops, "measure_overlap", lambda sm: calls.append(("overlap", sm)) or {"tensor_simt_overlap": 0.6})

    def ctas(sm):
        raise RuntimeError("no CTAs today")

    monkeypatch.setattr(ops, "measure_cta_dispatch", ctas)
    monkeypatch.setattr(ops, "measure", lambda sm, clk: calls.append(("simt_ops", sm, clk)) or ({"mul": 1.0}, {"mul": 2.0}))
    return calls


def test_run_ops_stages_in_fixed_order_and_failures_recorded(fake_ops):
    res = runner.run_ops(["simt_ops", "ctas", "launch"], 132, 1.98e9)
    assert list(res) == ["launch", "ctas", "simt_ops"]                      # OPS_STAGES order, not the argument's
    assert fake_ops == ["launch", ("simt_ops", 132, 1.98e9)]
    assert res["ctas"] == {"error": "RuntimeError: no CTAs today"}
    assert res["simt_ops"] == {"rates": {"mul": 1.0}, "times_us": {"mul": 2.0}, "clock_hz": 1.98e9}
    assert list(runner.run_ops(runner.OPS_DEFAULT, 8, 1e9)) == ["launch", "overlap", "simt_ops"]


def test_sm_clock_from_the_driver_else_the_config(monkeypatch):
    base = load_gpu("h200")
    monkeypatch.setattr(driver, "nvidia_smi", lambda fields: {"clocks.max.sm": "1755"})
    assert runner.sm_clock_hz(base) == (1.755e9, "nvidia-smi clocks.max.sm")
    monkeypatch.setattr(driver, "nvidia_smi", lambda fields: {"error": "nvidia-smi: not found"})
    assert runner.sm_clock_hz(base) == (base.clock_hz, "h200 config clock_hz")


def test_calibrate_ops_needs_cuda(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(runner, "_cuda_problem", lambda: "no CUDA device visible to torch")
    out = tmp_path / "ops.json"
    assert main(["calibrate", "--ops", str(out)]) == 1
    assert "gpusim calibrate: no CUDA device visible to torch" in capsys.readouterr().err
    assert not out.exists()


def test_calibrate_ops_writes_the_json(tmp_path, fake_ops, monkeypatch):
    torch = pytest.importorskip("torch")

    class Props:
        multi_processor_count = 4

    monkeypatch.setattr(runner, "_cuda_problem", lambda: None)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: Props())
    monkeypatch.setattr(driver, "nvidia_smi", lambda fields: {"error": "none"})
    out = tmp_path / "sub" / "ops.json"
    assert main(["calibrate", "--ops", str(out), "--ops-stages", "overlap,simt_ops", "--base", "h100"]) == 0
    data = json.loads(out.read_text())
    assert data == {"overlap": {"tensor_simt_overlap": 0.6},
                    "simt_ops": {"rates": {"mul": 1.0}, "times_us": {"mul": 2.0}, "clock_hz": load_gpu("h100").clock_hz}}
