"""GPU configs: every shipped config loads and is plausible; unit mistakes get a "did you mean";
load_gpu's messages are one short line naming the file and the field."""
import pytest

from gpusim.hardware import CONFIG_DIR, PLAUSIBLE, ConfigError, GPUConfig, available_gpus, load_gpu, \
    plausibility_problem


@pytest.mark.parametrize("name", available_gpus())
def test_shipped_configs_load_and_are_plausible(name):
    cfg = load_gpu(name)
    for field in PLAUSIBLE:
        v = getattr(cfg, field)
        for x in (v.values() if isinstance(v, dict) else [v]):
            assert plausibility_problem(field, x) is None, (name, field, x)
    assert cfg.hbm_bytes >= 40 * 2**30          # every config has its HBM capacity


def test_every_numeric_field_has_a_range():
    numeric = {n for n, f in GPUConfig.model_fields.items()
               if f.annotation in (int, float) or "float" in str(f.annotation) or "int" in str(f.annotation)}
    numeric -= {"tensor_tile_efficiency", "measurements", "tensor_simt_overlap"}   # bounded by pydantic itself
    assert numeric <= set(PLAUSIBLE), numeric - set(PLAUSIBLE)


@pytest.mark.parametrize("field,value,hint", [
    ("hbm_read_bandwidth_bytes_per_s", 3.35, "did you mean 3.35e12 (TB/s)?"),
    ("hbm_read_bandwidth_bytes_per_s", 3350, "did you mean 3350e9 (GB/s)?"),
    ("clock_hz", 1830, "did you mean 1830e6 (MHz)?"),
    ("clock_hz", 1.83, "did you mean 1.83e9 (GHz)?"),
    ("tensor_flops_per_s", 989, "did you mean 989e12 (TFLOP/s)?"),
    ("sram_bytes_per_sm", 228, "did you mean 233472 (228 KiB)?"),
    ("l2_bytes", 50, "did you mean 52428800 (50 MiB)?"),
    ("sm_count", 5000, "outside the plausible range 1 .. 1024"),
    ("nvlink_bandwidth_bytes_per_s", 900, "did you mean 900e9 (GB/s)?"),
    ("nccl_ramp_bytes", 18, "did you mean 18874368 (18 MiB)?"),
    ("nccl_ring_efficiency", 0.001, "outside the plausible range 0.05 .. 1"),
])
def test_plausibility_hints(field, value, hint):
    assert plausibility_problem(field, value) == hint


@pytest.mark.parametrize("field", ["nvlink_links", "nvlink_bandwidth_bytes_per_s", "nccl_ramp_bytes"])
def test_none_is_plausible_but_a_small_value_is_not(field):
    assert plausibility_problem(field, 0) is None           # no NVLink, no ramp
    assert plausibility_problem(field, 0.5) is not None


def test_plausible_values_pass():
    assert plausibility_problem("clock_hz", 1.83e9) is None
    assert plausibility_problem("hbm_read_bandwidth_bytes_per_s", 4.8e12) is None
    assert plausibility_problem("not_a_field", 1) is None


def _variant(tmp_path, old, new):
    text = (CONFIG_DIR / "h100-ideal.yaml").read_text()
    assert old in text
    p = tmp_path / "x.yaml"
    p.write_text(text.replace(old, new))
    return p


def _message(path) -> str:
    with pytest.raises(ConfigError) as e:
        load_gpu(path)
    msg = str(e.value)
    assert "\n" not in msg and len(msg) < 200, msg
    return msg


def test_bandwidth_in_tb_per_s(tmp_path):
    p = _variant(tmp_path, "hbm_read_bandwidth_bytes_per_s: 3.35e12", "hbm_read_bandwidth_bytes_per_s: 3.35")
    assert _message(p) == f"{p}: hbm_read_bandwidth_bytes_per_s = 3.35: did you mean 3.35e12 (TB/s)?"


def test_dict_field_names_the_key(tmp_path):
    p = _variant(tmp_path, "fp16: 989.0e12", "fp16: 989")
    assert "tensor_flops_per_s.fp16 = 989: did you mean 989e12 (TFLOP/s)?" in _message(p)


def test_missing_field_is_short(tmp_path):
    p = _variant(tmp_path, "sm_count: 132\n", "")
    msg = _message(p)
    assert msg.startswith(f"{p}: missing field sm_count")


def test_two_missing_fields_are_both_named(tmp_path):
    text = (CONFIG_DIR / "h100-ideal.yaml").read_text().replace("sm_count: 132\n", "").replace("l2_latency_cycles", "#")
    p = tmp_path / "x.yaml"
    p.write_text(text)
    msg = _message(p)
    assert "missing field sm_count" in msg and "l2_latency_cycles" in msg


def test_missing_file_and_directory(tmp_path):
    assert _message(tmp_path / "nope.yaml") == f"{tmp_path / 'nope.yaml'}: file not found " \
                                                "(a GPU is a name from `gpusim gpus` or a path to a GPU YAML)"
    assert "is a directory" in _message(str(tmp_path) + "/")


def test_unknown_name_suggests():
    assert "did you mean 'h100'" in _message("h1000")


def test_empty_and_list_files(tmp_path):
    p = tmp_path / "e.yaml"
    p.write_text("")
    assert "the file is empty" in _message(p)
    p.write_text("- 1\n- 2\n")
    assert "got a list (is it a GPU config?)" in _message(p) and "[1, 2]" not in _message(p)


def test_huge_input_is_not_printed_whole(tmp_path):
    p = tmp_path / "big.yaml"
    p.write_text("name: [" + ", ".join(["1234567890"] * 2000) + "]\n")
    msg = _message(p)
    assert "field name" in msg and "..." in msg


def test_cross_field_rule_is_one_line(tmp_path):
    p = _variant(tmp_path, "sram_bytes_per_cta_max: 232448", "sram_bytes_per_cta_max: 300000")
    assert _message(p) == f"{p}: sram_bytes_per_cta_max cannot exceed sram_bytes_per_sm"
