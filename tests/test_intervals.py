"""Prediction intervals (gpusim/intervals.py, gpusim/data/intervals.json): read from the shipped
table for a point's group, none for an -ideal bound, wider on a derived config, in results.csv and
the DataFrame, and calibrated on the held-out points recorded after the check's fit."""
import csv
import importlib.util
import json
import math
from pathlib import Path

import pytest

import gpusim
from gpusim import intervals
from gpusim.cli import main
from gpusim.hardware import load_gpu
from gpusim.result import METRIC_COLUMNS, KernelResult, Result

ROOT = Path(__file__).resolve().parents[1]
HELDOUT = ROOT / "tests" / "data" / "interval_residuals_heldout.csv"
SHIPPED = json.loads(intervals.DATA_FILE.read_text())


def _result(gpu="h200", kernel="matmul", spills=False, time_us=100.0, **params):
    """A hand-made ok Result: one launch of ``time_us`` at 2 CTAs per SM."""
    k = KernelResult("main", (132, 1, 1), 2, "registers", 1.0, time_us, time_us * 1980, 1e6, 1e6, 2e6, 1e6, 0.0,
                     1e9, 0.0, 0.0, 0.5, 0.1, 0.0, 132, 132, 0, spills=spills, clock_hz=1.98e9)
    params = {"num_warps": 8, "num_stages": 3, "dtype": "fp16", "M": 4096, "N": 4096, "K": 4096, **params}
    return Result(gpu, kernel, params, "ok", "", (k,), time_us, hbm_bandwidth_bytes_per_s=4.8e12, clock_hz=1.98e9,
                  l2_bandwidth_bytes_per_s=9e12, sm_count=132)


def test_interval_comes_from_the_shipped_table_for_its_group():
    r = _result()
    g = SHIPPED["groups"]["matmul"]
    assert r.interval.group == "matmul"
    assert r.time_us_lo == pytest.approx(100.0 * math.exp(g["lo"]))
    assert r.time_us_hi == pytest.approx(100.0 * math.exp(g["hi"]))
    assert r.time_us_lo < r.time_us < r.time_us_hi
    spill = _result(spills=True)      # a spilling matmul is its own, wider group
    assert spill.interval.group == "matmul/spills" and spill.time_us_hi > r.time_us_hi
    user = _result(kernel="my_kernel")  # an unknown kernel falls back to the pooled group
    assert user.interval.group == "pooled"


def test_an_ideal_config_is_a_bound_and_carries_no_interval():
    r = _result(gpu="h200-ideal")
    assert (r.time_us_lo, r.time_us_hi, r.interval.reason) == (None, None, "bound")
    row = r.row()
    assert row["time_us_lo"] == "" and row["time_us_hi"] == "" and row["interval"] == "bound"
    assert intervals.config_kind(load_gpu("h100-ideal")) == ("bound", "bound")


def test_a_derived_config_is_wider_and_says_why():
    assert intervals.config_kind(load_gpu("h200"))[0] == "measured"
    kind, why = intervals.config_kind(load_gpu("h100"))
    assert kind == "derived" and "not measured" in why
    what_if = load_gpu("h200").model_copy(update={"l2_bytes": 25_000_000})
    assert intervals.config_kind(what_if)[0] == "derived"
    feats = intervals.features("attention_flash", {"num_warps": 4}, [(1, False, 1.0)])
    m = intervals.interval(50.0, feats, "measured")
    d = intervals.interval(50.0, feats, kind, why)
    assert d.lo < m.lo < 50.0 < m.hi < d.hi
    assert math.log(d.hi / d.lo) == pytest.approx(SHIPPED["derived_widen"] * math.log(m.hi / m.lo))
    assert "widened" in d.reason and "h100" in d.reason and d.label.endswith("derived")


def test_results_csv_and_dataframe_have_the_interval_beside_the_time(tmp_path, capsys):
    i = METRIC_COLUMNS.index("time_us")
    assert METRIC_COLUMNS[i:i + 3] == ("time_us", "time_us_lo", "time_us_hi")
    p = tmp_path / "s.yaml"
    p.write_text("kernel: elementwise_fused\ngpu: h200\ncheck: false\nsweep: {gpu: [h200, h100, h200-ideal]}\n"
                 "params: {n: 65536}\n")
    assert main(["run", str(p), "--out", str(tmp_path / "o"), "--jobs", "1", "--no-plots"]) == 0
    assert "90% range" in capsys.readouterr().out
    rows = list(csv.DictReader(open(tmp_path / "o" / "results.csv")))
    h200, h100, ideal = rows
    for r in (h200, h100):
        assert float(r["time_us_lo"]) < float(r["time_us"]) < float(r["time_us_hi"])
    # both named configs have recorded points: the calibration's conformal interval of the family
    assert (h200["interval"], h100["interval"]) == ("elementwise", "elementwise")
    assert h200["calibration"].startswith("fitted") and h100["calibration"].startswith("fitted")
    assert ideal["calibration"] == "off" and ideal["time_us"] == ideal["time_us_sim"]     # a bound stays a bound
    assert ideal["time_us_lo"] == ideal["time_us_hi"] == "" and ideal["interval"] == "bound"
    pd = pytest.importorskip("pandas")
    df = gpusim.simulate("elementwise_fused", "h200", n=65536, check=False).to_pandas()
    assert {"time_us_lo", "time_us_hi"} <= set(df.columns) and isinstance(df, pd.DataFrame)


def _coverage(rows):
    inside = sum(intervals.lookup(r, SHIPPED)[1] <= r["r"] <= intervals.lookup(r, SHIPPED)[2] for r in rows)
    return inside / len(rows)


def test_shipped_intervals_cover_85_to_95_percent_of_the_later_heldout_points():
    rows = [{k: (v == "True" if v in ("True", "False") else v) for k, v in r.items()} for r in csv.DictReader(open(HELDOUT))]
    for r in rows:
        r["r"] = float(r["r"])
    assert len(rows) >= 200 and min(int(r["round"]) for r in rows) == 15
    assert 0.85 <= _coverage(rows) <= 0.95
    for fam in {r["family"] for r in rows}:
        fr = [r for r in rows if r["family"] == fam]
        inside = round(_coverage(fr) * len(fr))
        # a family of 20-40 points cannot resolve 85-95% (at a true 90%, 20 of 20 inside happens
        # 12% of the time): its count must only be one a calibrated 90% interval gives with
        # probability 1% or more (two-sided binomial test)
        assert _binomial_p(inside, len(fr), 0.90) >= 0.01, (fam, inside, len(fr))


def _binomial_p(k: int, n: int, p: float) -> float:
    """Two-sided binomial test: the probability of a count as unlikely as ``k`` of ``n`` at rate ``p``."""
    pmf = [math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(n + 1)]
    return min(1.0, sum(q for q in pmf if q <= pmf[k] * (1 + 1e-9)))


def test_the_binomial_test_rejects_a_miscalibrated_count():
    assert _binomial_p(90, 100, 0.9) > 0.5
    assert _binomial_p(70, 100, 0.9) < 1e-6 and _binomial_p(100, 100, 0.9) < 1e-4
    assert _binomial_p(20, 20, 0.9) > 0.1


def test_split_conformal_quantiles():
    spec = importlib.util.spec_from_file_location("fit_intervals", ROOT / "benchmarks" / "fit_intervals.py")
    fit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fit)
    rs = list(range(1, 100))          # n = 99: the 5th and the 95th smallest
    assert fit.conformal(rs, 0.9) == (5, 95)
    assert fit.conformal(list(range(13)), 0.9) == (0, 12)   # 13 points: [min, max] covers 12/14 >= 85%
    assert fit.conformal(list(range(12)), 0.9) is None      # 12: 11/13 < 85%, the family's group instead


def test_time_plot_shades_the_interval():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gpusim.output.plots import _draw_series

    fig, ax = plt.subplots()
    series = {"flash": {1024: 50.0, 2048: 200.0}}
    _draw_series(ax, series, {"flash": ("flash", "h200")}, {1024: 1024, 2048: 2048},
                 {"flash": {1024: (45.0, 70.0), 2048: (180.0, 280.0)}})
    (band,) = ax.collections
    ys = band.get_paths()[0].vertices[:, 1]
    assert ys.min() == pytest.approx(45.0) and ys.max() == pytest.approx(280.0)
    plt.close(fig)
