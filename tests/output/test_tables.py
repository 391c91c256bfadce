"""gpusim.output.tables: the one table formatter and the table `gpusim run` prints."""
import pytest

from gpusim.output.tables import BOUND_LEGEND, CALIBRATION_NOTE, format_table, run_table, shown_params

ROWS = [
    {"gpu": "h100", "kernel": "attention_naive", "seq_len": 1024, "BLOCK_M": "", "status": "ok", "time_us": 264.44,
     "time_us_lo": 198.1, "time_us_hi": 601.9, "time_us_sim": 281.27, "calibration": "fitted", "tflops": 67.5, "clock_mhz": 1980, "dram_read_bytes": 423.5e6, "dram_write_bytes": 411.0e6, "l2_hit_rate": 0.368, "bound": "memory",
     "max_rel_err": ""},
    {"gpu": "h100", "kernel": "attention_flash", "seq_len": 2048, "BLOCK_M": 128, "status": "ok", "time_us": 86.0,
     "time_us_lo": 66.2, "time_us_hi": 170.3, "time_us_sim": 80.04, "calibration": "fitted", "tflops": 817.6, "clock_mhz": 1700, "dram_read_bytes": 50.3e6, "dram_write_bytes": 16.8e6, "l2_hit_rate": 0.909, "bound": "tensor",
     "max_rel_err": ""},
]


def test_run_table_layout_is_the_one_the_readme_shows():
    assert run_table(ROWS, ["seq_len", "BLOCK_M", "batch"]).splitlines() == [
        " gpu           kernel  seq_len  BLOCK_M  status  time_us    90% range  sim_us  tflops  clock_mhz  dram_read_MB"
        "  dram_write_MB  l2_hit_rate   bound  max_rel_err",
        "----  ---------------  -------  -------  ------  -------  -----------  ------  ------  ---------  ------------"
        "  -------------  -----------  ------  -----------",
        "h100  attention_naive     1024               ok    264.4  198.1-601.9   281.3    67.5       1980         423.5"
        "          411.0        36.8%  memory             ",
        "h100  attention_flash     2048      128      ok     86.0   66.2-170.3    80.0   817.6       1700          50.3"
        "           16.8        90.9%  tensor             ",
        BOUND_LEGEND,
        f"calibration: fitted ({CALIBRATION_NOTE})",
    ]


def test_single_point_shows_its_parameter_values():
    one = [dict(ROWS[1], batch=4, heads=16)]
    assert shown_params(one, ["batch", "heads", "seq_len", "BLOCK_M", "causal"]) == [
        "batch", "heads", "seq_len", "BLOCK_M"]                  # causal: no value, no column
    head, _, line = run_table(one, ["batch", "heads", "seq_len", "BLOCK_M", "causal"]).splitlines()[:3]
    assert head.split()[:6] == ["gpu", "kernel", "batch", "heads", "seq_len", "BLOCK_M"]
    assert line.split()[:6] == ["h100", "attention_flash", "4", "16", "2048", "128"]


def test_points_not_ok_get_one_reason_line_each():
    bad = [dict(ROWS[1], BLOCK_M=m, status="infeasible", time_us="", time_us_lo="", time_us_hi="", tflops="", dram_read_bytes="",
                dram_write_bytes="", l2_hit_rate="", bound="", reason="needs SRAM") for m in (256, 512)]
    lines = run_table(ROWS + bad, ["seq_len", "BLOCK_M"]).splitlines()
    assert len(lines) == 2 + 4 + 1 + 1 + 1 and lines[6] == BOUND_LEGEND     # the legend under the table
    assert lines[7] == f"calibration: fitted ({CALIBRATION_NOTE})"        # what the ok rows' times are
    assert lines[-1] == "attention_flash infeasible (2 points): needs SRAM"


def test_format_table_rows_as_dicts_or_sequences_left_or_right():
    right = format_table([{"a": 1, "b": "xyz"}, {"a": 22}], ["a", "b"], headers={"b": "B"})
    assert right.splitlines() == [" a    B", "--  ---", " 1  xyz", "22     "]
    left = format_table([("k", 1.5), ("key", None)], ["field", "v"], align="left", rule=False)
    assert left.splitlines() == ["field  v  ", "k      1.5", "key       "]
    fmt = format_table([{"x": 0.5}, {"x": ""}], ["x"], formats={"x": lambda v: f"{v:.0%}"})
    assert fmt.splitlines() == ["  x", "---", "50%", "   "]
    assert format_table([], ["a", "bb"]).splitlines() == ["a  bb", "-  --"]
    with pytest.raises(ValueError, match="align"):
        format_table([], ["a"], align="centre")
