"""gpusim tune / gpusim.tune: the search space a spec declares, the ranking, the indistinguishable
count, and the pruning function for triton.autotune (called on triton.Config look-alikes)."""
from types import SimpleNamespace

import pandas as pd
import pytest

from gpusim.cli import main
from gpusim.tune import TuneError, indistinguishable, overlap_note, overlaps_best, prune_configs, rank, search_space


def test_search_space_from_the_spec():
    sp = search_space("matmul")
    assert sp["BLOCK_M"] == (32, 64, 128, 256) and sp["num_warps"] == (4, 8) and sp["num_stages"] == (2, 3, 4)
    assert "M" not in sp and "dtype" not in sp
    assert 0 in search_space("rmsnorm")["BLOCK"]                 # the default (whole row) stays a candidate
    assert search_space("matmul", {"BLOCK_M": [64]})["BLOCK_M"] == (64,)


@pytest.mark.parametrize("space, msg", [({"M": [64]}, "not a tunable"), ({"BLOCK_M": [48]}, "must be one of")])
def test_bad_space_is_an_error(space, msg):
    with pytest.raises(TuneError, match=msg):
        search_space("matmul", space)


def test_indistinguishable():
    r = pd.DataFrame({"time_us": [10.0, 10.3, 10.49, 12.0]})
    assert indistinguishable(r, 5.0) == 3 and indistinguishable(r, 1.0) == 1


def test_overlaps_best_marks_intervals_that_meet_the_best():
    r = pd.DataFrame({"time_us": [10.0, 12.0, 20.0, 11.0], "time_us_lo": [8.0, 10.5, 17.0, 7.0],
                      "time_us_hi": [11.0, 15.0, 25.0, 7.5]})
    # [10.5, 15] meets [8, 11]; [17, 25] starts after 11; [7, 7.5] ends before 8
    assert overlaps_best(r) == [True, True, False, False]
    r["overlaps_best"] = overlaps_best(r)
    assert overlap_note(r).startswith("1 of the other 3 configs have a 90% interval overlapping the best's "
                                      "(overlaps_best): indistinguishable from the best within the 90% intervals.")
    alone = r.assign(overlaps_best=[True, False, False, False])
    assert "the best is ahead within the 90% intervals" in overlap_note(alone)
    bound = pd.DataFrame({"time_us": [10.0, 11.0], "time_us_lo": [None, None], "time_us_hi": ["", ""]})
    bound["overlaps_best"] = overlaps_best(bound)                 # an -ideal config: no intervals, no note
    assert list(bound.overlaps_best) == [None, None] and overlap_note(bound) == ""


def test_cli_ranking_shows_the_overlap(capsys):
    assert main(["tune", "elementwise_fused", "--set", "n=65536", "--space", "BLOCK=[128,4096]", "num_warps=[4]"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["rank", "BLOCK", "num_warps", "time_us", "time_us_lo", "time_us_hi",
                                           "overlaps_best", "tflops", "bound"]
    assert "indistinguishable from the best within the 90% intervals" in out or "ahead within the 90%" in out


def _cfg(block, warps):
    return SimpleNamespace(kwargs={"BLOCK": block, "UNUSED": 1}, num_warps=warps, num_stages=2)


def test_prune_keeps_the_predicted_fastest():
    shape = {"n": 1 << 16}
    configs = [_cfg(128, 4), _cfg(4096, 4), _cfg(1024, 8)]
    prune = prune_configs("elementwise_fused", shape, "h100", top_k=2)
    kept = prune(configs, {})
    assert len(kept) == 2 and all(c in configs for c in kept)
    ranking = rank("elementwise_fused", "h100", shape, {"BLOCK": [128, 4096, 1024], "num_warps": [4, 8]})
    times = {(r.BLOCK, r.num_warps): r.time_us for r in ranking.itertuples()}
    by_pred = sorted(configs, key=lambda c: times[(c.kwargs["BLOCK"], c.num_warps)])
    assert kept == by_pred[:2]
    assert list(ranking.time_us) == sorted(ranking.time_us) and list(ranking["rank"]) == list(range(1, 7))
    assert list(ranking.overlaps_best)[0] is True and len(ranking.overlaps_best) == 6


def test_cli_bad_space_exits_2(capsys):
    assert main(["tune", "matmul", "--space", "BLOCK_M=[48]"]) == 2
    assert "BLOCK_M must be one of" in capsys.readouterr().err


def test_cli_prints_and_saves_each_configs_interval(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUSIM_RESOURCES", "estimated")     # no compile: a quick test
    assert main(["tune", "softmax", "--gpu", "h200", "--set", "rows=64", "cols=1024",
                 "--space", "num_warps=[4,8]", "BLOCK=[0]", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "time_us_lo" in out.splitlines()[0] and "time_us_hi" in out.splitlines()[0]
    import pandas as pd
    df = pd.read_csv(tmp_path / "tune.csv")
    assert ((df.time_us_lo < df.time_us) & (df.time_us < df.time_us_hi)).all()
