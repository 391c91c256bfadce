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
