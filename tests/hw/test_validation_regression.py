"""Accuracy cannot silently regress: re-simulate every point recorded on the H200 (measured times in
docs/validation/h200/val_*/validation.json) with the recorded calibrated config, and compare the
median and p90 absolute time error (and the tile-sweep rank correlation) with the recorded summary.
Slow: it re-predicts every recorded point."""
import json
from pathlib import Path

import pytest

from gpusim.hw.validate.analysis import analyze
from gpusim.hw.validate.predict import resimulate

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "docs" / "validation" / "h200"
CONFIG = ROOT / "configs" / "h200.yaml"
CASES = sorted(RECORDED.glob("val_*/validation.json")) + sorted(RECORDED.glob("heldout/val_*/validation.json"))
MARGIN_PCT = 2.0        # percentage points of error the model may drift before this fails
# Tile groups recorded when the register estimate got their occupancy wrong, now re-based: with the
# layout-based estimate (docs/resources.md) the simulated CTAs/SM equal those from the H200's compiled
# registers for all 8 points of this group (the old estimate: 4 of 8; over all 254 recorded H200
# launches 234 vs 167), and the rank correlation of the 8 points, 0.14 (was 0.26), is the timing
# model's own.
SPEARMAN_REBASED = {("val_flash_headdim", "head_dim=32"): 0.14}
# Likewise the median time error of flash warps x stages, recorded at 28.5% with the old estimate: with
# the layout-based one the simulated CTAs/SM equal those from the compiled registers at 36 of its 36
# launches, and the median error is 31.7% (p90 51.3%, was 53.1%): the timing model's own error.
MEDIAN_REBASED = {"val_flash_warps_stages": 31.8}


def test_recorded_validations_exist():
    assert {p.parent.name for p in CASES} >= {"val_flash_seq", "val_flash_tiles", "val_naive", "val_elementwise",
                                               "val_matmul"}


@pytest.mark.slow
@pytest.mark.parametrize("vjson", CASES, ids=lambda p: p.parent.name)
def test_accuracy_does_not_regress(vjson):
    recorded = json.loads((vjson.parent / "summary.json").read_text())
    rows = resimulate(vjson, CONFIG, jobs=2)
    now = analyze(rows)
    for scope in ("point", "launch"):
        rec, cur = recorded["time_error"][scope], now["time_error"][scope]
        assert cur["n"] == rec["n"]
        median = max(rec["median_abs_pct"], MEDIAN_REBASED.get(vjson.parent.name, 0.0))
        assert cur["median_abs_pct"] <= median + MARGIN_PCT, (scope, cur, rec)
        assert cur["p90_abs_pct"] <= rec["p90_abs_pct"] + MARGIN_PCT, (scope, cur, rec)
    for g_rec, g_cur in zip(recorded.get("tile_groups", []), now.get("tile_groups", [])):
        if g_rec.get("spearman") is not None:
            floor = next((v for (case, tag), v in SPEARMAN_REBASED.items()
                          if case == vjson.parent.name and tag in g_rec["group"].split(",")), g_rec["spearman"])
            assert g_cur["spearman"] >= floor - 0.02
