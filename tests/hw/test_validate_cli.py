"""``gpusim validate --reanalyze`` through the command line on a recorded H200 run, and the
one-line errors of ``gpusim validate`` / ``gpusim calibrate`` (no GPU needed for any of it)."""
import csv
import gzip
import shutil
from pathlib import Path

import pytest

from gpusim.cli import main
from gpusim.hw.validate.rows import load_validation

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "data" / "h200" / "val_elementwise"      # 10 points, the smallest run
CONFIG = ROOT / "configs" / "h200.yaml"
REPORT = ("validation.csv", "summary.json", "summary.md", "scatter.png", "error_by_point.png")


def _csv(path):
    with (gzip.open(path, "rt", newline="") if path.suffix == ".gz" else open(path, newline="")) as f:
        return list(csv.DictReader(f))


def test_reanalyze_rebuilds_the_report_from_validation_json(tmp_path, capsys):
    assert main(["validate", "--reanalyze", str(RECORDED), "--out", str(tmp_path)]) == 0
    for name in REPORT:
        assert (tmp_path / name).stat().st_size > 0, name
    out = capsys.readouterr().out
    assert "elementwise_chain" in out and f"wrote {tmp_path / 'validation.csv'}" in out
    rows, recorded = _csv(tmp_path / "validation.csv"), _csv(RECORDED / "validation.csv.gz")
    assert [r["point"] for r in rows] == [r["point"] for r in recorded]
    assert [r["measured_us"] for r in rows] == [r["measured_us"] for r in recorded]
    data = load_validation(RECORDED)
    assert [float(r["predicted_us"]) for r in rows if r["scope"] == "point"] == pytest.approx(
        [p["predicted"]["total_us"] for p in data["points"]], rel=1e-5)       # as recorded, 6 digits
    assert "# Validation: " in (tmp_path / "summary.md").read_text()


def test_reanalyze_of_a_copy_writes_beside_it(tmp_path):
    shutil.copy(RECORDED / "validation.json.gz", tmp_path / "validation.json.gz")
    assert main(["validate", "--reanalyze", str(tmp_path)]) == 0
    assert (tmp_path / "summary.md").exists() and (tmp_path / "validation.csv").exists()


@pytest.mark.slow
def test_reanalyze_with_the_recorded_config_reproduces_the_recorded_report(tmp_path, monkeypatch):
    """Every point re-predicted on configs/h200.yaml: the same CSV as stored at the last re-baseline
    of the mechanistic model (in this process, without the calibration file: tests/calibration
    judges that layer)."""
    from gpusim.calibration import model

    monkeypatch.setattr(model, "DATA", tmp_path / "no-calibration.json")
    assert main(["validate", "--reanalyze", str(RECORDED), "--gpu", str(CONFIG), "--out", str(tmp_path),
                 "--jobs", "1"]) == 0
    assert (tmp_path / "validation.csv").read_text() == gzip.decompress(
        (RECORDED / "validation.csv.gz").read_bytes()).decode()


def _exit_code(argv):
    try:
        return main(argv)
    except SystemExit as e:          # argparse's own errors
        return e.code


@pytest.mark.parametrize("argv,needle", [
    (["validate"], "exactly one of SCENARIO, --reanalyze DIR, --ncu-points FILE"),
    (["validate", "s.yaml", "--reanalyze", "d"], "(got SCENARIO, --reanalyze)"),
    (["validate", "scenarios/validate_seq.yaml"], "needs --out DIR"),
    (["validate", "--reanalyze", "/nonexistent/run"], "no validation.json or validation.json.gz there"),
    (["validate", "--reanalyze", str(RECORDED), "--no-ncu"], "--no-ncu only apply when measuring a SCENARIO"),
    (["validate", "--reanalyze", str(RECORDED), "--gpu", "no-such-gpu"], "no-such-gpu"),
    (["calibrate"], "one of the arguments --out --ops is required"),
    (["calibrate", "--ops", "o.json", "--out", "c.yaml"], "not allowed with argument"),
    (["calibrate", "--ops", "o.json", "--quick"], "--ops has no quick plan"),
    (["calibrate", "--out", "c.yaml", "--ops-stages", "launch"], "--ops-stages needs --ops"),
    (["calibrate", "--ops", "o.json", "--ops-stages", "launch,warp"], "launch, overlap, ctas, segments, simt_ops"),
])
def test_bad_usage_is_one_line_and_exit_2(argv, needle, capsys):
    code = _exit_code(argv)
    err = capsys.readouterr().err
    assert code == 2 and needle in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("name", ["validate", "calibrate"])
def test_every_option_has_help_and_the_command_a_description(name):
    import argparse

    from gpusim.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    p = sub.choices[name]
    assert p.description and len(p.description) > 40
    for a in p._actions:
        assert a.help and a.help != argparse.SUPPRESS, a.dest
