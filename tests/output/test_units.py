"""gpusim.output.units: GPU fields in their units, plain numbers, ratios to the first row."""
from gpusim.output import units


def test_fields_print_in_their_units():
    f = units.fmt_field
    assert f("gpu.hbm_read_bandwidth_bytes_per_s", 3135805726147.925) == "3.136 TB/s"
    assert f("gpu.l2_bytes", 52428800) == "50 MiB" and f("gpu.sram_bytes_per_sm", 233472) == "228 KiB"
    assert f("gpu.sram_bytes_per_cta_max", 101376) == "99 KiB" and f("gpu.clock_hz", 1.98e9) == "1.98 GHz"
    assert f("gpu.fp32_flops_per_s", 6.7e13) == "67 TFLOP/s" and f("gpu.power_limit_w", 700.0) == "700 W"
    assert f("gpu.sm_count", 132) == "132" and f("gpu.tensor_simt_overlap", 0.642) == "0.642"


def test_one_unit_per_column_by_its_largest_value():
    assert units.field_unit("gpu.l2_bytes", [4194304, 52428800]) == (1 << 20, "MiB")
    assert units.field_unit("gpu.l2_bytes", [512 << 10]) == (1 << 10, "KiB")
    assert units.field_unit("gpu.sm_count", [132]) is None


def test_plain_numbers_never_use_e_notation():
    assert units.plain(4480.3) == "4,480" and units.plain(3.13580) == "3.136" and units.plain(1e6) == "1,000,000"
    assert units.fmt_us(4480.3) == "4,480" and units.fmt_us(207) == "207.0" and units.fmt_us(9.534) == "9.53"


def test_what_if_cells_and_the_time_against_the_first_row():
    rows = [{"gpu.l2_bytes": 4194304, "status": "ok", "time_us": 30.0},
            {"gpu.l2_bytes": 52428800, "status": "ok", "time_us": 24.0},
            {"gpu.l2_bytes": 52428800, "status": "infeasible"}]
    fmt = units.whatif_formats(rows, ["gpu.l2_bytes"])["gpu.l2_bytes"]
    assert fmt(4194304) == "4 MiB (1.00x)" and fmt(52428800) == "50 MiB (12.5x)"
    assert [r[units.TIME_RATIO] for r in units.with_time_ratio(rows)] == ["1.00x", "0.80x", ""]
