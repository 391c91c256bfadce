"""Every shipped GPU config loads, is named after its file, and says where its numbers come from."""
from pathlib import Path
import pytest

from gpusim.hardware import CONFIG_DIR, GPUConfig, available_gpus, load_gpu

NAMED = ("h200", "h100", "a100", "a100-80gb")


@pytest.mark.parametrize("name", available_gpus())
def test_config_loads_and_is_named_after_its_file(name):
    cfg = load_gpu(name)
    assert isinstance(cfg, GPUConfig) and cfg.name == name


@pytest.mark.parametrize("name", NAMED)
def test_named_configs_are_real_parts_with_an_ideal_twin(name):
    real, ideal = load_gpu(name), load_gpu(f"{name}-ideal")
    # every numeric field of the real part has a source
    for field, value in real.model_dump().items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and field in GPUConfig.model_fields:
            assert field in real.sources, (name, field)
    # the real part is measured (or derived from a measurement): slower than its datasheet bound
    assert real.tensor_flops_per_s["fp16"] < ideal.tensor_flops_per_s["fp16"]
    assert real.hbm_read_bandwidth_bytes_per_s < ideal.hbm_read_bandwidth_bytes_per_s


def test_config_dir_holds_only_loadable_configs():
    assert sorted(p.stem for p in CONFIG_DIR.glob("*.yaml")) == sorted(available_gpus())


def test_configs_are_laid_out_by_source_and_say_what_they_borrow():
    """Each shipped config is in the sectioned layout (datasheet, measured, corrections, borrowed),
    each value under its source; the derived parts name the H200 values they borrow."""
    import yaml

    from gpusim.hw.config_yaml import dump_config, fitted_numbers, header_of

    root = Path(__file__).resolve().parents[1] / "configs"
    for p in sorted(root.glob("*.yaml")):
        text = p.read_text()
        assert dump_config(yaml.safe_load(text), header_of(text)) == text, f"{p.name}: run benchmarks/annotate_configs.py"
    h200 = yaml.safe_load((root / "h200.yaml").read_text())
    a100 = yaml.safe_load((root / "a100.yaml").read_text())
    assert fitted_numbers(h200, own_only=True) == fitted_numbers(h200) > 100
    assert fitted_numbers(a100, own_only=True) == 0 < fitted_numbers(a100)      # every fitted number is the H200's
    assert "# ==== borrowed from the H200" in (root / "h100.yaml").read_text()
