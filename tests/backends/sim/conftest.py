"""The timing model's own tests compare mechanistic times (often across configs that differ in one
field, which the calibration layer would give different models): they run with no calibration
file, so every result is the mechanistic time (``calibration: off``)."""
import pytest


@pytest.fixture(autouse=True)
def _mechanistic(monkeypatch, tmp_path):
    from gpusim.calibration import model

    monkeypatch.setattr(model, "DATA", tmp_path / "no-calibration.json")
