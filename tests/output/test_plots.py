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


def _band_rows(n_lines):
    return [{"gpu": "h100", "kernel": "attention_flash", "seq_len": n, "BLOCK_M": bm, "status": "ok",
             "time_us": n / bm, "time_us_lo": n / bm * 0.7, "time_us_hi": n / bm * 1.5}
            for bm in (16, 32, 64, 128, 256)[:n_lines] for n in (256, 512, 1024, 2048, 4096, 8192)]


def test_interval_bands_only_where_few_lines(tmp_path):
    import matplotlib

    from gpusim.output import plots as P

    for n_lines, shaded in ((3, True), (5, False)):
        d = tmp_path / str(n_lines)
        d.mkdir()
        with matplotlib.rc_context({"svg.fonttype": "none"}):
            P.line_plots(d, _band_rows(n_lines), ["seq_len", "BLOCK_M"], fmt="svg", sweep_order=["seq_len"])
        text = (d / "plot_time_us.svg").read_text()
        assert ("shaded: the 90% prediction interval" in text) == shaded
        assert ("time_us_lo, time_us_hi in results.csv" in text) == (not shaded)
