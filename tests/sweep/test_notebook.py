"""Notebook use: ``Result.to_pandas()`` and ``gpusim.sweep(...)`` returning a DataFrame with the
columns of results.csv; pandas stays an optional import with a clear error when missing."""
import csv
import sys

import pytest

import gpusim
from gpusim.cli import main
from gpusim.sweep.errors import ScenarioError

pd = pytest.importorskip("pandas")


def test_result_to_pandas_is_one_row():
    r = gpusim.simulate("elementwise_fused", "h100", n=4096)
    df = r.to_pandas()
    assert df.shape[0] == 1 and list(df.columns) == list(r.row())
    assert df.loc[0, "time_us"] == r.row()["time_us"] and df.loc[0, "status"] == "ok"


def test_pandas_missing_is_a_clear_error(monkeypatch):
    r = gpusim.simulate("elementwise_fused", "h100", n=4096)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"needs pandas: pip install 'gpusim\[pandas\]'"):
        r.to_pandas()
    with pytest.raises(ImportError, match="needs pandas"):
        gpusim.sweep("elementwise_fused", n=[1024])


def test_sweep_matches_the_cli(tmp_path, capsys):
    df = gpusim.sweep("elementwise_fused", gpu="a100", n=[1024, 2048, 4096], BLOCK=[256, 512])
    p = tmp_path / "s.yaml"
    p.write_text("kernel: elementwise_fused\ngpu: a100\nsweep: {n: [1024, 2048, 4096], BLOCK: [256, 512]}\n")
    assert main(["run", str(p), "--out", str(tmp_path / "o"), "--jobs", "1", "--no-plots"]) == 0
    capsys.readouterr()
    rows = list(csv.DictReader(open(tmp_path / "o" / "results.csv")))
    assert list(df.columns) == list(rows[0]) and len(df) == 6
    assert [str(x) for x in df["time_us"]] == [r["time_us"] for r in rows]
    assert list(df["n"]) == [1024, 1024, 2048, 2048, 4096, 4096]


def test_sweep_in_processes_and_gpu_what_ifs():
    df = gpusim.sweep("elementwise_fused", jobs=2, check=False, n=1 << 20, **{"gpu.l2_bytes": [25e6, 50e6]})
    assert list(df["gpu.l2_bytes"]) == [25000000, 50000000] and "gpu_overrides" not in df.columns
    assert set(df["status"]) == {"ok"}


def test_sweep_bad_input_is_a_scenario_error():
    with pytest.raises(ScenarioError, match=r"gpusim.sweep\(\): sweep.seqlen: unknown parameter \(did you mean .seq_len.\?\)"):
        gpusim.sweep("attention_flash", seqlen=[128])
