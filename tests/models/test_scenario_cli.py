"""`gpusim run` of a model scenario takes --set (a set field replaces its sweep) and --jobs."""
import csv

import pytest
import yaml

from gpusim.cli import main

TINY = dict(name="tiny", hidden=256, heads=4, kv_heads=2, head_dim=64, ffn=512, activation="swiglu",
            norm="rmsnorm", layers=2, vocab=1024)


def _scenario(tmp_path):
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    p = tmp_path / "sc.yaml"
    p.write_text(yaml.safe_dump(dict(name="tiny-decode", model="tiny.yaml", phase="decode", batch=1, context=64,
                                     sweep=dict(batch=[1, 4], context=[64, 128]))))
    return p


def _totals(out):
    with open(out / "results.csv") as f:
        return [r for r in csv.DictReader(f) if r["op"] == "total"]


@pytest.mark.slow
def test_set_replaces_the_swept_field(tmp_path, capsys):
    p = _scenario(tmp_path)
    rc = main(["run", str(p), "--out", str(tmp_path / "o"), "--no-plots", "--jobs", "1", "--set", "batch=2",
               "--set", "sweep.context=[96]"])
    assert rc == 0
    rows = _totals(tmp_path / "o")
    assert [(r["batch"], r["context"]) for r in rows] == [("2", "96")]
    assert "--set batch=2: replaces sweep.batch" in capsys.readouterr().err


@pytest.mark.parametrize("arg,msg", [("batch=abc", "field 'batch'"), ("nope=1", "field 'nope'"),
                                     ("batch", "expected KEY=VALUE")])
def test_bad_set_is_a_one_line_error(tmp_path, capsys, arg, msg):
    p = _scenario(tmp_path)
    assert main(["run", str(p), "--out", str(tmp_path / "o"), "--no-plots", "--set", arg]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("gpusim: error:") and msg in err


@pytest.mark.slow
def test_jobs_give_the_same_results_as_one_process(tmp_path):
    p = _scenario(tmp_path)
    from gpusim.models import simulate as ms
    ms._CACHE.clear()
    assert main(["run", str(p), "--out", str(tmp_path / "a"), "--no-plots", "--jobs", "1"]) == 0
    ms._CACHE.clear()
    assert main(["run", str(p), "--out", str(tmp_path / "b"), "--no-plots", "--jobs", "2"]) == 0
    assert [r["time_us"] for r in _totals(tmp_path / "a")] == [r["time_us"] for r in _totals(tmp_path / "b")]
    assert len(_totals(tmp_path / "a")) == 4
