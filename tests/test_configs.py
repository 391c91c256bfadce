"""Every shipped GPU config loads, is named after its file, and says where its numbers come from."""
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
