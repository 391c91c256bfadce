"""gpusim.output.traffic: which point each attention kernel is shown at, and its launches' bytes."""
import pytest

from gpusim.output import traffic


def test_traffic_uses_largest_seq_len_and_every_launch(attention):
    _, rows, krows, _ = attention
    pick, groups = traffic.traffic_groups(rows, krows)
    assert {k: rows[i]["seq_len"] for k, i in pick.items()} == {"attention_naive": 512, "attention_flash": 512}
    assert [(g[0], g[1]) for g in groups] == [("attention_naive", "qk"), ("attention_naive", "scale"),
                                              ("attention_naive", "softmax"), ("attention_naive", "pv"),
                                              ("attention_flash", "flash")]
    naive_hbm = sum(g[2] for g in groups if g[0] == "attention_naive")
    flash_hbm = sum(g[2] for g in groups if g[0] == "attention_flash")
    assert naive_hbm == pytest.approx(rows[pick["attention_naive"]]["dram_read_bytes"]
                                      + rows[pick["attention_naive"]]["dram_write_bytes"], rel=1e-6)
    assert flash_hbm < naive_hbm


def test_fastest_config_is_the_representative(tiles):
    _, rows, krows, _ = tiles
    pick, groups = traffic.traffic_groups(rows, krows)
    ok = [i for i, r in enumerate(rows) if r["status"] == "ok"]
    assert list(pick) == ["attention_flash"]
    assert pick["attention_flash"] == min(ok, key=lambda i: rows[i]["time_us"])
    assert [g[1] for g in groups] == ["flash"]


def test_chart_states_the_ratio(attention, tmp_path):
    import matplotlib

    _, rows, krows, _ = attention
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        (svg,) = traffic.traffic_chart(tmp_path, rows, krows, fmt="svg")
    text = svg.read_text()
    assert "fewer HBM bytes than naive" in text and "bytes moved per launch" in text
    assert traffic.traffic_chart(tmp_path, [r for r in rows if r["kernel"] == "matmul"], krows) == []


def test_totals_boxes_stay_inside_the_axes():
    # bytes of seq_len 16384, batch 1, 4 heads on an h100: the flash box ("33.6 MB" / "2.16 GB") is wider
    # than its single launch's slot at the right edge
    shape = {"gpu": "h100", "status": "ok", "seq_len": 16384, "batch": 1, "heads": 4, "head_dim": 64, "dtype": "fp16"}
    rows = [dict(shape, kernel="attention_naive", time_us=5000.0), dict(shape, kernel="attention_flash", time_us=300.0)]
    krows = [{"point": 0, "launch": name, "dram_read_bytes": h, "dram_write_bytes": 0, "l2_read_bytes": l}
             for name, h, l in (("qk", 2.19e9, 3.22e9), ("scale", 4.29e9, 2.15e9), ("softmax", 4.29e9, 2.15e9),
                                ("pv", 2.17e9, 3.22e9))]
    krows.append({"point": 1, "launch": "flash", "dram_read_bytes": 33.6e6, "dram_write_bytes": 0, "l2_read_bytes": 2.16e9})
    fig = traffic.draw_traffic(rows, krows)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (ax,) = fig.axes
    frame = ax.get_window_extent(renderer)
    boxes = [t.get_bbox_patch().get_window_extent(renderer) for t in ax.texts if t.get_text().startswith("total:")]
    assert len(boxes) == 2
    assert all(frame.x0 <= b.x0 and b.x1 <= frame.x1 for b in boxes)
