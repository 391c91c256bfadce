import pytest

from gpusim.models import ModelError, load_model, preset_names


def test_presets_load_with_published_sizes():
    assert {"llama3-8b", "llama3-70b", "mistral-7b", "gpt3-6.7b"} <= set(preset_names())
    assert 7.9e9 < load_model("llama3-8b").params() < 8.1e9
    assert 70e9 < load_model("llama3-70b").params() < 71e9
    assert 7.1e9 < load_model("mistral-7b").params() < 7.4e9
    assert 6.6e9 < load_model("gpt3-6.7b").params() < 6.9e9


def test_kv_bytes_per_token_llama3_8b():
    # 2 (K,V) x 32 layers x 8 kv heads x 128 x 2 bytes
    assert load_model("llama3-8b").kv_bytes_per_token() == 131072


def test_bad_field_names_file_and_field(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text("name: x\nhidden: 64\nheads: 3\nkv_heads: 2\nhead_dim: 16\nffn: 128\n"
                 "activation: relu\nnorm: rmsnorm\nlayers: 1\nvocab: 10\n")
    with pytest.raises(ModelError, match=r"m.yaml: field 'activation'"):
        load_model(p)
    with pytest.raises(ModelError, match="no such file or preset"):
        load_model("llama9")
