"""A failed exact check is a failure: status mismatch, the error in the table, exit code 1."""
import csv
from pathlib import Path

from gpusim.cli import main
from gpusim.result import check_status, check_tolerance

BUG = Path(__file__).parent / "data" / "kernels" / "rmsnorm_bug.py"
GOOD = Path(__file__).parents[1] / "scenarios" / "kernels" / "rmsnorm.py"


def _scenario(tmp_path, kernel):
    y = tmp_path / "s.yaml"
    y.write_text(f"name: s\ngpu: h100\nkernel: {kernel}:rms_norm\n"
                 "params: {eps: 1.0e-6, dtype: fp16, rows: 64, cols: 256}\ncheck: true\n")
    return y


def test_check_status_by_dtype():
    assert check_status({"dtype": "fp16"}, 1e-3) == ("ok", "")
    st, why = check_status({"dtype": "fp16"}, 0.325)
    assert st == "mismatch" and "0.325" in why and "0.005" in why
    assert check_status({"dtype": "bf16"}, 1e-2)[0] == "ok"
    assert check_status({}, float("nan"))[0] == "mismatch"
    assert check_status({"dtype": "fp32"}, None) == ("ok", "")
    assert check_tolerance({"dtype": "fp32"}) == 1e-2


def test_buggy_user_kernel_is_a_mismatch(tmp_path, capsys):
    rc = main(["run", str(_scenario(tmp_path, BUG)), "--out", str(tmp_path / "o"), "--no-plots", "--jobs", "1"])
    out = capsys.readouterr()
    assert rc == 1
    assert "mismatch" in out.out and "exceeds the fp16 tolerance" in out.out
    row = next(csv.DictReader(open(tmp_path / "o" / "results.csv")))
    assert row["status"] == "mismatch" and float(row["max_rel_err"]) > 0.1 and row["time_us"]


def test_correct_user_kernel_is_ok(tmp_path, capsys):
    rc = main(["run", str(_scenario(tmp_path, GOOD)), "--out", str(tmp_path / "o"), "--no-plots", "--jobs", "1"])
    assert rc == 0
    row = next(csv.DictReader(open(tmp_path / "o" / "results.csv")))
    assert row["status"] == "ok" and float(row["max_rel_err"]) <= 5e-3
