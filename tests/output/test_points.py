"""gpusim.output.points: values read from rows (numbers or CSV strings), the sweep axis, labels."""
from gpusim.output import points


def test_values_from_numbers_or_strings():
    assert points.num("1.5") == 1.5 and points.num(3) == 3.0
    assert points.num("") is None and points.num("nan") is None and points.num(True) is None
    assert points.pval("64") == 64 and points.pval(64.0) == 64 and points.pval("0.5") == 0.5
    assert points.pval("True") is True and points.pval("fp16") == "fp16" and points.pval(None) == ""
    assert points.dram_bytes({"dram_read_bytes": "10", "dram_write_bytes": 5}) == 15
    assert points.dram_bytes({"dram_read_bytes": "10"}) is None


def test_distinct_sorts_numbers_before_text_and_drops_empty():
    rows = [{"x": "128"}, {"x": 16}, {"x": ""}, {"x": "auto"}, {"x": 16.0}]
    assert points.distinct(rows, "x") == [16, 128, "auto"]


def test_formatting():
    assert points.fmt_bytes(2.5e9) == "2.5 GB" and points.fmt_bytes(512) == "512 B"
    assert points.fmt_rate(3.35e12, "B/s") == "3.35 TB/s"
    assert points.compact(1 << 26) == "2^26" and points.compact(4096) == "4096"
    assert points.safe_name("runs/my scenario.yaml") == "my_scenario"


def test_sweep_axis_choice():
    rows = [{"gpu": "h100", "kernel": "k", "seq_len": s, "BLOCK_M": b, "dtype": "fp16"}
            for s in (1024, 2048, 4096) for b in (64, 128)]
    assert points.sweep_axis(rows, ["seq_len", "BLOCK_M", "dtype"]) == "seq_len"
    assert points.sweep_axis(rows[:1], ["seq_len", "BLOCK_M"]) is None
    two = [r for r in rows if r["seq_len"] != 4096]     # a tie on 2 values each: scenario order decides
    assert points.sweep_axis(two, ["seq_len", "BLOCK_M"], sweep_order=["BLOCK_M", "seq_len"]) == "BLOCK_M"


def test_constants_line_says_which_kernel_takes_what():
    rows = [{"gpu": "h100", "kernel": "attention_naive", "seq_len": 1024, "BLOCK_M": "", "batch": 4},
            {"gpu": "h100", "kernel": "attention_flash", "seq_len": 2048, "BLOCK_M": 128, "batch": 4}]
    line = points.constants_line(rows, ["seq_len", "BLOCK_M", "batch"], skip=("seq_len",))
    assert line == "h100 · batch=4 · flash only: BLOCK_M=128"


def test_labels():
    r = {"gpu": "h100", "kernel": "attention_flash", "seq_len": 4096, "BLOCK_M": 64, "dtype": "bf16"}
    assert points.point_label(r, "seq_len", ["gpu", "BLOCK_M", "dtype"]) == "flash N=4096 BM=64 bf16"
    assert points.series_label(r, ["gpu", "BLOCK_M"], with_kernel=True) == "attention_flash h100 BLOCK_M=64"
