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


def test_a_point_recorded_twice_is_one_row_with_the_mean_and_spread(tmp_path):
    import gzip

    rec = {"scenario": "scenarios/calibration/x_r25_00.yaml", "set": "train", "point": 3, "kernel": "matmul",
           "params": {"M": 64, "dtype": "fp16"}, "device": "NVIDIA H100 80GB HBM3", "timing_method": "do_bench",
           "triton": "3.6.0", "torch": "2", "cuda": "13", "recorded_at": "t", "status": "ok", "check": "sampled",
           "max_rel_err": 0.0, "tolerance": 0.02}
    (tmp_path / "h100" / "recorded").mkdir(parents=True)
    for i, t in enumerate((10.0, 12.0)):
        with gzip.open(tmp_path / "h100" / "recorded" / f"c{i}.jsonl.gz", "wt") as fh:
            fh.write(json.dumps(dict(rec, measured_us=t)) + "\n" + json.dumps(dict(rec, point=4, measured_us=5.0)) + "\n")
    rows = {r["point"]: r for r in build_points_table.recorder_rows(tmp_path)}
    assert len(rows) == 2
    assert rows[3]["measured_us"] == 11.0 and abs(rows[3]["measured_spread_pct"] - 100 * 2 / 11) < 1e-9
    assert rows[4]["measured_us"] == 5.0 and rows[4]["measured_spread_pct"] == 100 * 0.0 / 5.0


def test_a_point_timed_with_the_workers_stopped_replaces_its_earlier_times(tmp_path):
    import gzip

    rec = {"scenario": "scenarios/validation/heldout/gemv_shapes_round46.yaml", "set": "heldout", "point": 3,
           "kernel": "gemv_splitk", "params": {"N": 64, "dtype": "fp16"}, "device": "NVIDIA H100 80GB HBM3",
           "timing_method": "do_bench", "triton": "3.6.0", "torch": "2", "cuda": "13", "recorded_at": "t0",
           "status": "ok", "check": "sampled", "max_rel_err": 0.0, "tolerance": 0.02}
    stopped = dict(rec, timing_method="do_bench, " + build_points_table.STOPPED, recorded_at="t1")
    (tmp_path / "h100" / "recorded").mkdir(parents=True)
    for i, r in enumerate((dict(rec, measured_us=66.5), dict(stopped, measured_us=9.8),
                           dict(stopped, measured_us=10.2))):
        with gzip.open(tmp_path / "h100" / "recorded" / f"c{i}.jsonl.gz", "wt") as fh:
            fh.write(json.dumps(r) + "\n")
    (row,) = build_points_table.recorder_rows(tmp_path)
    assert abs(row["measured_us"] - 10.0) < 1e-9 and abs(row["measured_spread_pct"] - 4.0) < 1e-9
    assert row["recorded_at"] == "t1" and build_points_table.STOPPED in row["timing_method"]
    assert row["set"] == "heldout" and row["point"] == 3
