"""The tidy table of every point recorded on a GPU (data/points.csv.gz, written by
benchmarks/build_points_table.py from data/h200/**/validation.json.gz and the recorder's
data/<gpu>/recorded/*.jsonl.gz): it loads, has one row per recorded point with the documented
columns, and agrees with the recorded data it was built from."""
import importlib.util
import json
from pathlib import Path

import pandas as pd

from gpusim.hw.validate.rows import load_validation

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "data" / "points.csv.gz"
spec = importlib.util.spec_from_file_location("build_points_table", ROOT / "benchmarks" / "build_points_table.py")
build_points_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build_points_table)


def test_table_loads_with_its_columns():
    df = pd.read_csv(TABLE)
    assert list(df.columns) == build_points_table.COLUMNS
    assert len(df) >= 1000
    assert set(df["set"]) == {"recorded", "heldout", "micro", "train"}
    assert df[["gpu", "scenario", "point"]].duplicated().sum() == 0
    ok = df[df["status"] == "ok"]
    assert (ok["measured_us"] > 0).all() and (ok["max_rel_err"] <= ok["tolerance"]).all()
    assert set(df["stored_prediction_view"].dropna()) <= {"estimated", "compiled"}
    assert {"h100", "h200"} <= set(df["gpu"])


def test_recorder_rows_rebuild_the_stored_rows():
    rows = pd.DataFrame(build_points_table.recorder_rows(ROOT / "data"))
    stored = pd.read_csv(TABLE)
    stored = stored[stored["timing_method"].str.contains("one input set")].reset_index(drop=True)
    assert len(rows) == len(stored) > 0
    assert (rows["measured_us"].fillna(-1) - stored["measured_us"].fillna(-1)).abs().max() <= 1e-5 * rows["measured_us"].max()
    assert set(rows["gpu"]) <= {"h100", "h200", "a100"}


def test_table_rows_match_the_recorded_json():
    df = pd.read_csv(TABLE)
    data = load_validation(ROOT / "data" / "h200" / "val_matmul")
    rows = df[df["scenario"] == "val_matmul"].set_index("point")
    assert len(rows) == len(data["points"])
    for p in data["points"]:
        r = rows.loc[p["index"]]
        assert json.loads(r["params"]) == p["params"]
        assert abs(r["measured_us"] / (sum(p["measured"]["total_us"]) / 2) - 1) < 1e-5
        assert abs(r["recorded_predicted_us"] / p["predicted"]["total_us"] - 1) < 1e-5


def test_scenario_rows_rebuild_the_stored_rows():
    prov = json.loads((ROOT / "data" / "h200" / "provenance.json").read_text())
    name = "heldout/val_decode_round17"
    rebuilt = pd.DataFrame(build_points_table.scenario_rows(ROOT / "data" / "h200" / name, name, prov[name]))
    stored = pd.read_csv(TABLE)
    stored = stored[stored["scenario"] == name].reset_index(drop=True)
    assert len(rebuilt) == len(stored) > 0
    for c in ("measured_us", "stored_predicted_us", "max_rel_err"):
        assert ((rebuilt[c] - stored[c]).abs() <= 1e-5 * stored[c].abs()).all(), c


def test_headline_table_counts_every_recorded_and_held_out_point():
    spec = importlib.util.spec_from_file_location("headline_table", ROOT / "benchmarks" / "headline_table.py")
    headline = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(headline)
    df = pd.read_csv(TABLE)
    text = headline.markdown(df, "estimated")
    est = df[(df["set"] != "micro") & (df["stored_prediction_view"] == "estimated") & (df["status"] == "ok")]
    for tag in ("recorded", "heldout"):
        n = est[(est["set"] == tag)].dropna(subset=["stored_error_pct"]).shape[0]
        assert f"| {tag} | **all** | {n} |" in text
    assert text in (ROOT / "docs" / "validation.md").read_text()      # the docs show this output
