"""Predictions cannot move silently: points recorded on the H200 re-simulated with configs/h200.yaml
(estimated resources, as tests/conftest.py pins) must give the predictions pinned in
tests/data/pinned_predictions.csv, within a fixed tolerance.

The pinned table holds 40 recorded and held-out points, four per kernel family at fixed quantiles of
their error (written once by benchmarks/pin_predictions.py, from the round-17 model). A change meant
to move predictions re-pins them in its own commit and says which moved and by how much; the
accuracy of every recorded point is measured by benchmarks/validation_table.py, not here.
The fast test re-simulates the three quickest pinned points; the slow one every pinned point.
"""
import json
from pathlib import Path

import pandas as pd
import pytest

from gpusim.hardware import load_gpu
from gpusim.hw.validate.predict import simulate_point

ROOT = Path(__file__).resolve().parents[2]
PINNED = pd.read_csv(ROOT / "tests" / "data" / "pinned_predictions.csv")
POINTS = ROOT / "data" / "points.csv.gz"
TOLERANCE = 0.005          # relative: 0.5% of the pinned prediction
QUICK = PINNED.nsmallest(3, "sim_seconds")


@pytest.fixture(scope="module")
def h200():
    return load_gpu(str(ROOT / "configs" / "h200.yaml"))


def _check(row, cfg):
    got = simulate_point(row.kernel, json.loads(row.params), cfg)
    assert got["status"] == "ok", got
    # the mechanistic time: the calibration layer is tested on its own (tests/calibration)
    assert got["sim_us"] == pytest.approx(row.pinned_us, rel=TOLERANCE), (row.scenario, row.point)


def test_pinned_points_cover_every_family_and_are_recorded_points():
    assert len(PINNED) >= 30 and PINNED["kernel"].nunique() >= 8
    table = pd.read_csv(POINTS).set_index(["scenario", "point"])
    for r in PINNED.itertuples():
        rec = table.loc[(r.scenario, r.point)]
        assert rec["kernel"] == r.kernel and json.loads(rec["params"]) == json.loads(r.params)
        assert rec["measured_us"] == pytest.approx(r.measured_us, rel=1e-5)


@pytest.mark.parametrize("row", list(QUICK.itertuples()), ids=lambda r: f"{r.scenario}[{r.point}]")
def test_quick_pinned_predictions(row, h200):
    _check(row, h200)


@pytest.mark.slow
@pytest.mark.parametrize("row", list(PINNED.itertuples()), ids=lambda r: f"{r.scenario}[{r.point}]")
def test_every_pinned_prediction(row, h200):
    _check(row, h200)
