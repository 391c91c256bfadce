"""gpusim.output.plots: the line plots' pivot CSVs hold the plotted numbers; series, labels and notes."""
import csv

import matplotlib
import pytest

from gpusim.output import plots

from .conftest import names


def test_pivot_csvs_hold_the_plotted_numbers(attention, tmp_path):
    sc, rows, _, _ = attention
    paths = plots.line_plots(tmp_path, rows, sc.param_names)
    assert names(paths) == ["plot_dram_bytes.csv", "plot_dram_bytes.png", "plot_tflops.csv", "plot_tflops.png",
                            "plot_time_us.csv", "plot_time_us.png"]
    with open(tmp_path / "plot_time_us.csv") as f:
        table = list(csv.reader(f))
    assert table[0] == ["seq_len", "attention_naive", "attention_flash"]
    assert [r[0] for r in table[1:]] == ["256", "512"]
    by = {(r["kernel"], r["seq_len"]): float(r["time_us"]) for r in rows}
    for line in table[1:]:
        assert float(line[1]) == pytest.approx(by[("attention_naive", int(line[0]))], rel=1e-5)
        assert float(line[2]) == pytest.approx(by[("attention_flash", int(line[0]))], rel=1e-5)
    with open(tmp_path / "plot_dram_bytes.csv") as f:
        dram = list(csv.DictReader(f))
    flash512 = next(r for r in rows if r["kernel"] == "attention_flash" and r["seq_len"] == 512)
    assert float(dram[1]["attention_flash"]) == flash512["dram_read_bytes"] + flash512["dram_write_bytes"]


def test_one_series_per_kernel_and_gpu(elementwise, tmp_path):
    sc, rows, _, _ = elementwise
    plots.line_plots(tmp_path, rows, sc.param_names)
    with open(tmp_path / "plot_tflops.csv") as f:
        header = next(csv.reader(f))
    assert header == ["n", "elementwise_chain h100", "elementwise_fused h100", "elementwise_chain a100",
                      "elementwise_fused a100"]


def test_axes_carry_units_and_the_subtitle_counts_points_left_out(attention, tmp_path):
    sc, rows, _, _ = attention
    rows = [dict(r, status="error", time_us="") if i == 0 else r for i, r in enumerate(rows)]
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        plots.line_plots(tmp_path, rows, sc.param_names, fmt="svg")
    text = (tmp_path / "plot_time_us.svg").read_text()
    assert "time (µs)" in text and "seq_len (" in text          # y unit; x axis named with its help text
    assert "not shown: 1 error point(s)" in text
    assert "Time vs seq_len" in text


def test_nothing_swept_means_no_line_plots(attention, tmp_path):
    sc, rows, _, _ = attention
    assert plots.line_plots(tmp_path, rows[:1], sc.param_names) == []
    assert plots.line_plots(tmp_path, [dict(r, status="infeasible") for r in rows], sc.param_names) == []
