"""gpusim.output.heatmap: the tile grid, the best cell, and what infeasible cells say."""
import matplotlib

from gpusim.output import heatmap
from gpusim.output.units import fmt_us


def test_tile_heatmap_marks_infeasible_cells(tiles, tmp_path):
    sc, rows, _, _ = tiles
    ms, ns, cell, grid, best = heatmap.tile_grid(rows)
    assert ms == ns == [32, 64, 128, 256]
    infeasible = {k for k, r in cell.items() if r["status"] == "infeasible"}
    # SRAM per CTA = 2 B x 256 x (BM + 3 x 2 x BN); h100 allows 227 KiB
    expected = {(m, n) for m in ms for n in ns if 2 * 256 * (m + 6 * n) > 227 * 1024}
    assert infeasible == expected
    assert {(32, 32), (32, 64), (64, 64), (256, 32)} <= set(cell) - infeasible
    assert (128, 64) in infeasible and (32, 128) in infeasible
    assert all("SRAM per CTA" in cell[k]["reason"] for k in infeasible)
    for (m, n), _r in cell.items():
        finite = grid[ms.index(m), ns.index(n)] == grid[ms.index(m), ns.index(n)]
        assert finite == ((m, n) not in infeasible)
    ok_times = {k: r["time_us"] for k, r in cell.items() if k not in infeasible}
    assert (ms[best[0]], ns[best[1]]) == min(ok_times, key=ok_times.get)

    with matplotlib.rc_context({"svg.fonttype": "none"}):
        (svg,) = heatmap.tile_heatmap(tmp_path, rows, sc.param_names, fmt="svg")
    text = svg.read_text()
    assert "infeasible: needs more SRAM per CTA than h100 allows (227 KiB)" in text
    assert "needs" in text and "256 KiB" in text          # the (128, 64) cell says what it needs
    assert "★" in text and "fastest" in text
    assert "time (µs), lower is better" in text


def test_one_panel_per_other_combination(tiles, tmp_path):
    sc, rows, _, _ = tiles
    two = [dict(r, num_stages=s) for s in (2, 3) for r in rows]
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        (svg,) = heatmap.tile_heatmap(tmp_path, two, sc.param_names, fmt="svg")
    text = svg.read_text()
    assert "num_stages=2" in text and "num_stages=3" in text


def test_no_heatmap_without_two_tile_dimensions(attention, tmp_path):
    sc, rows, _, _ = attention
    assert heatmap.tile_heatmap(tmp_path, rows, sc.param_names) == []


def test_figure_title_clears_the_panel_titles(tiles):
    sc, rows, _, _ = tiles
    two = [dict(r, num_stages=s) for s in (2, 3) for r in rows]
    fig = heatmap.draw_tile_heatmap(two, sc.param_names)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (top,) = [t.get_window_extent(renderer) for t in fig.texts if t.get_text().startswith("Time per tile shape")]
    panels = [ax.title.get_window_extent(renderer) for ax in fig.axes if ax.get_title()]
    assert len(panels) == 2
    assert all(p.y1 <= top.y0 for p in panels)           # display y grows upwards: panel titles sit below


def _combos(rows, stages=(2, 3), warps=(4,)):
    return [dict(r, num_stages=s, num_warps=w, time_us=r["time_us"] * (1 + 0.1 * s) / w ** 0.1 * 1000)
            if r["status"] == "ok" else dict(r, num_stages=s, num_warps=w)
            for s in stages for w in warps for r in rows]


def test_every_panel_on_one_colour_scale_in_plain_microseconds(tiles, tmp_path):
    sc, rows, _, _ = tiles
    two = _combos(rows)
    fig = heatmap.draw_tile_heatmap(two, sc.param_names + ["num_warps"])
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 2
    norms = {(ax.images[0].norm.vmin, ax.images[0].norm.vmax) for ax in panels}
    ok = [r["time_us"] for r in two if r["status"] == "ok"]
    assert norms == {(min(ok), max(ok))}                  # one scale: the same colour is the same time
    assert len(fig.axes) == 3                              # the two panels and one colour bar
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        (svg,) = heatmap.tile_heatmap(tmp_path, two, sc.param_names + ["num_warps"], fmt="svg")
    text = svg.read_text()
    assert "e+0" not in text and "," in text               # 4,480 µs, never 4.48e+03
    assert text.count("★") == 2              # one best cell (and the legend's key)
    # the other panel names how far its own fastest is behind the fastest
    assert sum("on the fastest" in ax.get_title().replace("\n", " ") for ax in panels) == 1


def test_more_combinations_than_panels_keep_the_best_of_each_cell(tiles):
    sc, rows, _, _ = tiles
    many = _combos(rows, stages=(2, 3, 4, 5), warps=(4, 8))
    fig = heatmap.draw_tile_heatmap(many, sc.param_names + ["num_warps"])
    (ax,) = [ax for ax in fig.axes if ax.images]
    texts = [t.get_text() for t in ax.texts]
    assert "fastest of the 8 combinations" in ax.get_title()
    best = min(r["time_us"] for r in many if r["status"] == "ok")
    assert any(t == f"★ {fmt_us(best)}" for t in texts)
    assert {"stages=2 warps=8", "warps=8 stages=2"} & set(texts)     # the winning values, under the time
