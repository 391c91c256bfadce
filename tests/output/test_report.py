"""gpusim.report: which plots a run gets, their files and pivot CSVs, the heatmap's infeasible cells."""
import csv
import textwrap

import matplotlib
import pytest

from gpusim.output import report
from gpusim.sweep.scenario import load_scenario, run_scenario

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _run(tmp_path_factory, name, yaml_text):
    d = tmp_path_factory.mktemp(name)
    src = d / f"{name}.yaml"
    src.write_text(textwrap.dedent(yaml_text))
    sc = load_scenario(src)
    rows, krows = run_scenario(sc, d / "out", jobs=1, progress=False)
    return sc, rows, krows, d / "out"


@pytest.fixture(scope="module")
def attention(tmp_path_factory):
    return _run(tmp_path_factory, "attn", """
        name: attn
        gpu: h100
        kernel: attention_flash
        check: false
        params: {batch: 1, heads: 2, head_dim: 64}
        sweep:
          kernel: [attention_naive, attention_flash]
          seq_len: [256, 512]
        """)


@pytest.fixture(scope="module")
def tiles(tmp_path_factory):
    # head_dim 256, 3 stages: a CTA holds q [BM, 256] once and k, v [BN, 256] three times each (fp16)
    return _run(tmp_path_factory, "tiles", """
        name: tiles
        gpu: h100
        kernel: attention_flash
        check: false
        params: {batch: 1, heads: 2, head_dim: 256, num_stages: 3, seq_len: 256}
        sweep:
          BLOCK_M: [32, 64, 128, 256]
          BLOCK_N: [32, 64, 128, 256]
        """)


@pytest.fixture(scope="module")
def elementwise(tmp_path_factory):
    return _run(tmp_path_factory, "ew", """
        name: ew
        kernel: elementwise_chain
        check: false
        params: {BLOCK: 1024}
        sweep:
          gpu: [h100, a100]
          kernel: [elementwise_chain, elementwise_fused]
          n: [65536, 262144]
        """)


def _is_png(p):
    return p.read_bytes()[:8] == PNG_MAGIC


def _names(paths):
    return sorted(p.name for p in paths)


def test_attention_run_writes_line_plots_roofline_and_traffic(attention, tmp_path, capsys):
    sc, rows, krows, _ = attention
    paths = report.make_reports(tmp_path, sc, rows, krows)
    assert capsys.readouterr().err == ""
    assert _names(paths) == ["plot_dram_bytes.csv", "plot_dram_bytes.png", "plot_tflops.csv", "plot_tflops.png",
                             "plot_time_us.csv", "plot_time_us.png", "roofline_h100.png", "traffic.png"]
    for p in paths:
        assert p.exists() and p.parent == tmp_path
        if p.suffix == ".png":
            assert _is_png(p)
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


def test_traffic_uses_largest_seq_len_and_every_launch(attention):
    _, rows, krows, _ = attention
    pick, groups = report.traffic_groups(rows, krows)
    assert {k: rows[i]["seq_len"] for k, i in pick.items()} == {"attention_naive": 512, "attention_flash": 512}
    assert [(g[0], g[1]) for g in groups] == [("attention_naive", "qk"), ("attention_naive", "scale"),
                                              ("attention_naive", "softmax"), ("attention_naive", "pv"),
                                              ("attention_flash", "flash")]
    naive_hbm = sum(g[2] for g in groups if g[0] == "attention_naive")
    flash_hbm = sum(g[2] for g in groups if g[0] == "attention_flash")
    assert naive_hbm == pytest.approx(rows[pick["attention_naive"]]["dram_read_bytes"]
                                      + rows[pick["attention_naive"]]["dram_write_bytes"], rel=1e-6)
    assert flash_hbm < naive_hbm


def test_svg_format_and_rows_read_back_from_csv(attention, tmp_path):
    sc, _, _, out = attention
    with open(out / "results.csv") as f:
        rows = list(csv.DictReader(f))       # every value a string
    with open(out / "kernels.csv") as f:
        krows = list(csv.DictReader(f))
    paths = report.make_reports(tmp_path, sc, rows, krows, fmt="svg")
    images = [p for p in paths if p.suffix != ".csv"]
    assert images and all(p.suffix == ".svg" for p in images)
    assert "traffic.svg" in _names(paths) and "roofline_h100.svg" in _names(paths)
    for p in images:
        assert p.read_text().lstrip().startswith("<?xml") and "<svg" in p.read_text()[:2000]


def test_tile_heatmap_marks_infeasible_cells(tiles, tmp_path, capsys):
    sc, rows, krows, _ = tiles
    paths = report.make_reports(tmp_path, sc, rows, krows)
    assert capsys.readouterr().err == ""
    assert "tile_heatmap.png" in _names(paths) and _is_png(tmp_path / "tile_heatmap.png")
    assert "traffic.png" in _names(paths)          # flash alone still gets its traffic bars

    ms, ns, cell, grid, best = report.tile_grid(rows)
    assert ms == ns == [32, 64, 128, 256]
    infeasible = {k for k, r in cell.items() if r["status"] == "infeasible"}
    # SRAM per CTA = 2 B x 256 x (BM + 3 x 2 x BN); h100 allows 227 KiB
    expected = {(m, n) for m in ms for n in ns if 2 * 256 * (m + 6 * n) > 227 * 1024}
    assert infeasible == expected
    assert {(32, 32), (32, 64), (64, 64), (256, 32)} <= set(cell) - infeasible
    assert (128, 64) in infeasible and (32, 128) in infeasible
    assert all("SRAM per CTA" in cell[k]["reason"] for k in infeasible)
    for (m, n), r in cell.items():
        finite = grid[ms.index(m), ns.index(n)] == grid[ms.index(m), ns.index(n)]
        assert finite == ((m, n) not in infeasible)
    ok_times = {k: r["time_us"] for k, r in cell.items() if k not in infeasible}
    assert (ms[best[0]], ns[best[1]]) == min(ok_times, key=ok_times.get)

    with matplotlib.rc_context({"svg.fonttype": "none"}):
        (svg,) = report.tile_heatmap(tmp_path, rows, sc.param_names, fmt="svg")
    text = svg.read_text()
    assert "infeasible: needs more SRAM per CTA than h100 allows (227 KiB)" in text
    assert "needs" in text and "256 KiB" in text          # the (128, 64) cell says what it needs
    assert "★" in text and "fastest" in text


def test_rooflines_one_per_gpu_and_log2_axis(elementwise, tmp_path, capsys):
    sc, rows, krows, _ = elementwise
    paths = report.make_reports(tmp_path, sc, rows, krows)
    assert capsys.readouterr().err == ""
    names = _names(paths)
    assert "roofline_h100.png" in names and "roofline_a100.png" in names
    assert "traffic.png" not in names and "tile_heatmap.png" not in names
    with open(tmp_path / "plot_tflops.csv") as f:
        header = next(csv.reader(f))
    assert header == ["n", "elementwise_chain h100", "elementwise_fused h100", "elementwise_chain a100",
                      "elementwise_fused a100"]


def test_sweep_axis_choice():
    rows = [{"gpu": "h100", "kernel": "k", "seq_len": s, "BLOCK_M": b, "dtype": "fp16"}
            for s in (1024, 2048, 4096) for b in (64, 128)]
    assert report.sweep_axis(rows, ["seq_len", "BLOCK_M", "dtype"]) == "seq_len"
    assert report.sweep_axis(rows[:1], ["seq_len", "BLOCK_M"]) is None


def test_odd_inputs_never_raise(attention, tiles, tmp_path, capsys):
    sc, rows, krows, _ = attention
    assert report.make_reports(tmp_path / "empty", sc, [], []) == []
    single = report.make_reports(tmp_path, sc, rows[:1], [k for k in krows if k["point"] == 0])
    assert "roofline_h100.png" in _names(single) and "traffic.png" in _names(single)
    assert not any(n.startswith("plot_") for n in _names(single))     # nothing swept: no line plots
    tsc, trows, _, _ = tiles
    bad = [dict(r, status="infeasible", time_us="", reason="needs 999 KiB of SRAM per CTA, h100 allows 227 KiB")
           for r in trows]
    assert _names(report.make_reports(tmp_path, tsc, bad, [])) == ["tile_heatmap.png"]
    junk = [{"gpu": "nonexistent-gpu", "kernel": "attention_flash", "status": "ok", "time_us": "x", "flops": "1",
             "dram_read_bytes": None}, {"status": "ok"}, {}]
    assert report.make_reports(tmp_path, sc, junk, [{"point": "7"}]) == []
    assert capsys.readouterr().err == ""
