"""gpusim.output.report: which figures a run gets, in which format, and that odd input never raises."""
import csv

from gpusim.output import report

from .conftest import is_png, names


def test_attention_run_writes_line_plots_roofline_and_traffic(attention, tmp_path, capsys):
    sc, rows, krows, _ = attention
    paths = report.make_reports(tmp_path, sc, rows, krows)
    assert capsys.readouterr().err == ""
    assert names(paths) == ["plot_dram_bytes.csv", "plot_dram_bytes.png", "plot_tflops.csv", "plot_tflops.png",
                            "plot_time_us.csv", "plot_time_us.png", "roofline_h100.png", "traffic.png"]
    for p in paths:
        assert p.exists() and p.parent == tmp_path
        if p.suffix == ".png":
            assert is_png(p)


def test_elementwise_run_gets_a_roofline_per_gpu_and_no_attention_figures(elementwise, tmp_path, capsys):
    sc, rows, krows, _ = elementwise
    got = names(report.make_reports(tmp_path, sc, rows, krows))
    assert capsys.readouterr().err == ""
    assert "roofline_h100.png" in got and "roofline_a100.png" in got
    assert "traffic.png" not in got and "tile_heatmap.png" not in got


def test_tile_sweep_gets_the_heatmap_and_flash_traffic(tiles, tmp_path, capsys):
    sc, rows, krows, _ = tiles
    got = names(report.make_reports(tmp_path, sc, rows, krows))
    assert capsys.readouterr().err == ""
    assert "tile_heatmap.png" in got and is_png(tmp_path / "tile_heatmap.png")
    assert "traffic.png" in got          # flash alone still gets its traffic bars


def test_svg_format_and_rows_read_back_from_csv(attention, tmp_path):
    sc, _, _, out = attention
    with open(out / "results.csv") as f:
        rows = list(csv.DictReader(f))       # every value a string
    with open(out / "kernels.csv") as f:
        krows = list(csv.DictReader(f))
    paths = report.make_reports(tmp_path, sc, rows, krows, fmt="svg")
    images = [p for p in paths if p.suffix != ".csv"]
    assert images and all(p.suffix == ".svg" for p in images)
    assert "traffic.svg" in names(paths) and "roofline_h100.svg" in names(paths)
    for p in images:
        assert p.read_text().lstrip().startswith("<?xml") and "<svg" in p.read_text()[:2000]


def test_odd_inputs_never_raise(attention, tiles, tmp_path, capsys):
    sc, rows, krows, _ = attention
    assert report.make_reports(tmp_path / "empty", sc, [], []) == []
    single = report.make_reports(tmp_path, sc, rows[:1], [k for k in krows if k["point"] == 0])
    assert "roofline_h100.png" in names(single) and "traffic.png" in names(single)
    assert not any(n.startswith("plot_") for n in names(single))     # nothing swept: no line plots
    tsc, trows, _, _ = tiles
    bad = [dict(r, status="infeasible", time_us="", reason="needs 999 KiB of SRAM per CTA, h100 allows 227 KiB")
           for r in trows]
    assert names(report.make_reports(tmp_path, tsc, bad, [])) == ["tile_heatmap.png"]
    junk = [{"gpu": "nonexistent-gpu", "kernel": "attention_flash", "status": "ok", "time_us": "x", "flops": "1",
             "dram_read_bytes": None}, {"status": "ok"}, {}]
    assert report.make_reports(tmp_path, sc, junk, [{"point": "7"}]) == []
    # no line plots: one line each saying why
    assert capsys.readouterr().err.splitlines() == [
        "gpusim report: no line plots: only one value per parameter and GPU field",
        "gpusim report: no line plots: no point along BLOCK_M is ok (16 infeasible)",
        "gpusim report: no line plots: only one value per parameter and GPU field"]


def test_a_failing_figure_is_reported_and_skipped(attention, tmp_path, capsys, monkeypatch):
    sc, rows, krows, _ = attention

    def boom(*a, **k):
        raise RuntimeError("no ink")

    monkeypatch.setattr(report, "rooflines", boom)
    got = names(report.make_reports(tmp_path, sc, rows, krows))
    assert "gpusim report: roofline skipped: RuntimeError: no ink" in capsys.readouterr().err
    assert "traffic.png" in got and "plot_time_us.png" in got and not any(n.startswith("roofline") for n in got)
