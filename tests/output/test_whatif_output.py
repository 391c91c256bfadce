"""What-if output: each GPU field a run changes is a column of the printed table and an axis or a
series of the line plots; a zipped partner is named in the x label; a run without line plots says why."""
import csv
from types import SimpleNamespace

import matplotlib

from gpusim.output import plots, report
from gpusim.output.tables import run_table

SRAM = {131072: 101376, 233472: 232448}


def _rows(l2s=(4194304, 52428800), stages=(2, 3), srams=tuple(SRAM)):
    rows = []
    for s in srams:
        for l2 in l2s:
            for st in stages:
                t = 20.0 + (s == 131072) * 5 + (l2 < 1e7) * 3 + st
                rows.append({"gpu": "h100", "kernel": "matmul", "num_stages": st, "gpu.sram_bytes_per_sm": s,
                             "gpu.sram_bytes_per_cta_max": SRAM[s], "gpu.l2_bytes": l2, "status": "ok",
                             "time_us": t, "time_us_lo": t * 0.6, "time_us_hi": t * 2, "tflops": 8.6e3 / t,
                             "flops": 8.6e9, "dram_read_bytes": 8e6 + (l2 < 1e7) * 2e7, "dram_write_bytes": 8e6,
                             "l2_hit_rate": 0.9, "bound": "memory"})
    return rows


def _sc(sweep):
    return SimpleNamespace(param_names=["num_stages"], data={"sweep": sweep})


ZIPPED = {"zip": {"gpu.sram_bytes_per_sm": list(SRAM), "gpu.sram_bytes_per_cta_max": list(SRAM.values())},
          "gpu.l2_bytes": [4194304, 52428800], "num_stages": [2, 3]}


def test_table_has_a_column_per_gpu_field_and_tells_rows_apart():
    rows = _rows()
    lines = run_table(rows, ["num_stages"]).splitlines()
    head = lines[0].split()
    assert head[:6] == ["gpu", "kernel", "num_stages", "gpu.sram_bytes_per_sm", "gpu.sram_bytes_per_cta_max",
                        "gpu.l2_bytes"]
    end = lines[0].index("gpu.l2_bytes") + len("gpu.l2_bytes")
    body = [line[:end] for line in lines[2:2 + len(rows)]]
    assert len(set(body)) == len(rows)                             # no row looks like another
    # each field in its unit, with its ratio to the first row's value where it varies
    assert body[0].split() == ["h100", "matmul", "2", "128", "KiB", "(1.00x)", "99", "KiB", "(1.00x)", "4", "MiB",
                               "(1.00x)"]
    assert "228 KiB (1.78x)" in lines[-3] and "50 MiB (12.5x)" in lines[-2]
    # the time against the first row's: the baseline of the what-if
    assert "vs row 1" in lines[0] and " 1.00x " in lines[2] and f" {22.0 / 30.0:.2f}x " in lines[2 + len(rows) - 2]
    one = run_table([dict(rows[0], **{"gpu.hbm_read_bandwidth_bytes_per_s": 2e12})], ["num_stages"])
    assert "gpu.hbm_read_bandwidth_bytes_per_s" in one and " 2 TB/s " in one   # a --set field too, no ratio


def test_zipped_gpu_fields_are_the_axis_and_the_other_fields_the_lines(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "rooflines", lambda *a, **k: [])       # only the line plots matter here
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        paths = report.make_reports(tmp_path, _sc(ZIPPED), _rows(), [], fmt="svg")
    assert (tmp_path / "plot_time_us.svg").exists() and tmp_path / "plot_time_us.csv" in paths
    with open(tmp_path / "plot_time_us.csv") as f:
        table = list(csv.reader(f))
    # x: the first swept field; every other varying field splits the lines, none collapsed
    assert table[0] == ["gpu.sram_bytes_per_sm", "num_stages=2 gpu.l2_bytes=4 MiB", "num_stages=3 gpu.l2_bytes=4 MiB",
                        "num_stages=2 gpu.l2_bytes=50 MiB", "num_stages=3 gpu.l2_bytes=50 MiB"]
    assert [r[0] for r in table[1:]] == ["131072", "233472"]
    assert float(table[1][1]) == 30.0 and float(table[2][4]) == 23.0
    text = (tmp_path / "plot_time_us.svg").read_text()
    assert "in step: gpu.sram_bytes_per_cta_max = 99 KiB, 227 KiB" in text      # the zipped partner, in its unit
    assert ">128 KiB<" in text and ">228 KiB<" in text                         # the x ticks too
    assert "Time vs gpu.sram_bytes_per_sm" in text


def test_a_sweep_of_one_gpu_field_alone_is_plotted(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(report, "rooflines", lambda *a, **k: [])
    rows = _rows(stages=(3,), srams=(233472,))
    paths = report.make_reports(tmp_path, _sc({"gpu.l2_bytes": [4194304, 52428800]}), rows, [])
    assert tmp_path / "plot_time_us.png" in paths and capsys.readouterr().err == ""
    with open(tmp_path / "plot_time_us.csv") as f:
        assert next(csv.reader(f))[0] == "gpu.l2_bytes"


def test_no_line_plots_says_why_in_one_line(tmp_path, capsys):
    one = _rows(l2s=(4194304,), stages=(3,), srams=(233472,))
    assert plots.line_plots(tmp_path, one, ["num_stages", "gpu.l2_bytes"]) == []
    assert capsys.readouterr().err == "gpusim report: no line plots: only one value per parameter and GPU field\n"
    two_gpus = [dict(one[0]), dict(one[0], gpu="a100")]
    plots.line_plots(tmp_path, two_gpus, ["num_stages"])
    assert "only gpu varies: see the roofline" in capsys.readouterr().err
    bad = [dict(r, status="infeasible") for r in _rows(stages=(3,), srams=(233472,))]
    plots.line_plots(tmp_path, bad, ["num_stages", "gpu.l2_bytes"])
    assert capsys.readouterr().err == "gpusim report: no line plots: no point along gpu.l2_bytes is ok (2 infeasible)\n"


def test_roofline_roofs_are_the_what_if_gpus():
    from gpusim.hardware import load_gpu
    from gpusim.output.roofline import what_if_config

    h100 = load_gpu("h100")
    rows = [dict(r, **{"gpu.hbm_read_bandwidth_bytes_per_s": 2e12}) for r in _rows(srams=(233472,))]
    cfg, note = what_if_config(h100, rows)
    assert cfg.hbm_read_bandwidth_bytes_per_s == 2e12 and cfg.l2_bytes == h100.l2_bytes   # l2 varies: not applied
    assert note == "what-if: sram_bytes_per_sm=233472, sram_bytes_per_cta_max=232448, hbm_read_bandwidth_bytes_per_s=2e+12"
    varied = [dict(r, **{"gpu.hbm_read_bandwidth_bytes_per_s": 2e12 * (1 + i % 2)}) for i, r in enumerate(rows)]
    cfg, note = what_if_config(h100, varied)
    assert cfg.hbm_read_bandwidth_bytes_per_s == h100.hbm_read_bandwidth_bytes_per_s
    assert "without gpu.hbm_read_bandwidth_bytes_per_s, which differs between the points" in note
    assert what_if_config(h100, _rows(srams=(233472,), l2s=(4194304,)))[0].l2_bytes == 4194304


def test_tile_heatmap_gets_a_panel_per_gpu_field_value(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "rooflines", lambda *a, **k: [])
    monkeypatch.setattr(report, "line_plots", lambda *a, **k: [])
    rows = [{"gpu": "h100", "kernel": "matmul", "BLOCK_M": m, "BLOCK_N": n, "gpu.l2_bytes": l2, "status": "ok",
             "time_us": 10.0 + m / 64 + n / 128 + (l2 < 1e7)} for m in (64, 128) for n in (64, 128)
            for l2 in (4194304, 52428800)]
    sc = SimpleNamespace(param_names=["BLOCK_M", "BLOCK_N"], data={"sweep": {}})
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        assert report.make_reports(tmp_path, sc, rows, [], fmt="svg") == [tmp_path / "tile_heatmap.svg"]
    text = (tmp_path / "tile_heatmap.svg").read_text()
    assert "gpu.l2_bytes=4194304" in text and "gpu.l2_bytes=52428800" in text      # two panels, not one mixed grid
