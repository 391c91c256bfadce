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
# The recorded summaries were re-predicted with this model on 2026-12-01 (docs/validation.md, round 2:
# before/after per scenario there); a later change may not make any scenario worse than that.


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
        assert cur["median_abs_pct"] <= rec["median_abs_pct"] + MARGIN_PCT, (scope, cur, rec)
        assert cur["p90_abs_pct"] <= rec["p90_abs_pct"] + MARGIN_PCT, (scope, cur, rec)
    for g_rec, g_cur in zip(recorded.get("tile_groups", []), now.get("tile_groups", [])):
        if g_rec.get("spearman") is not None:
            assert g_cur["spearman"] >= g_rec["spearman"] - 0.02
