"""gpusim.output.roofline: one chart per GPU, roofs read from the GPU's config."""
import matplotlib

from gpusim.hardware import load_gpu
from gpusim.output import roofline

from .conftest import names


def test_one_roofline_per_gpu(elementwise, tmp_path):
    sc, rows, _, _ = elementwise
    assert names(roofline.rooflines(tmp_path, rows, sc.param_names)) == ["roofline_a100.png", "roofline_h100.png"]


def test_roofs_come_from_the_config():
    cfg = load_gpu("h100")
    slopes, tensor, top = roofline.roofs(cfg, ["fp16"])
    assert [s[0] for s in slopes] == [cfg.hbm_read_bandwidth_bytes_per_s, cfg.l2_bandwidth_bytes_per_s,
                                      cfg.sm_count * cfg.sm_load_bytes_per_clk * cfg.clock_hz]
    assert tensor == {cfg.tensor_flops_per_s["fp16"]: ["fp16"]}
    assert top == max(cfg.tensor_flops_per_s["fp16"], cfg.fp32_flops_per_s)


def test_chart_names_its_axes_and_points(attention, tmp_path):
    sc, rows, _, _ = attention
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        (svg,) = roofline.rooflines(tmp_path, rows, sc.param_names, fmt="svg")
    text = svg.read_text()
    assert "arithmetic intensity (FLOP per DRAM byte, read + write)" in text and "achieved FLOP/s" in text
    assert "Roofline — h100" in text and "tensor peak (fp16)" in text
    assert "flash N=512" in text or "point label(s) hidden" in text


def test_unknown_gpu_is_reported_not_raised(attention, tmp_path, capsys):
    sc, rows, _, _ = attention
    assert roofline.rooflines(tmp_path, [dict(r, gpu="no-such-gpu") for r in rows], sc.param_names) == []
    assert "roofline for no-such-gpu: cannot load config" in capsys.readouterr().err


def test_many_points_label_only_the_fastest_per_axis_value():
    pts = [(10.0, float(t), {"kernel": "attention_flash", "BLOCK_M": m, "BLOCK_N": n})
           for m in (16, 32, 64) for n in range(10) for t in [m * 100 + n]]
    ids, what = roofline.labelled_points(pts, "BLOCK_M")
    assert what == "the fastest point per kernel and BLOCK_M"
    assert sorted((r["BLOCK_M"], r["BLOCK_N"]) for *_, r in pts if id(r) in ids) == [(16, 9), (32, 9), (64, 9)]
    few = pts[:5]
    assert roofline.labelled_points(few, "BLOCK_M") == ({id(r) for *_, r in few}, "")
