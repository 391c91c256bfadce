"""benchmarks/layer_on_gpu.py: the numpy check's smaller shapes, and the one-line refusal without a GPU."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("layer_on_gpu", ROOT / "benchmarks" / "layer_on_gpu.py")
lg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lg)


def test_check_params_cap_the_big_dimensions_and_keep_the_tiles():
    p = dict(M=8192, N=28672, K=4096, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_warps=8, num_stages=4, dtype="bf16")
    c = lg.check_params("matmul", p)
    assert (c["M"], c["N"], c["K"]) == (256, 512, 1024) and c["BLOCK_N"] == 256 and c["num_stages"] == 4
    d = dict(batch=1, heads=32, kv_heads=8, q_len=1, kv_len=8192, head_dim=128, num_splits=16, dtype="bf16")
    assert lg.check_params("attention_decode", d)["kv_len"] == 2048
    small = dict(d, kv_len=256)
    assert lg.check_params("attention_decode", small) == small          # checked as timed
    assert lg.check_params("rmsnorm", dict(rows=1, cols=4096)) == dict(rows=1, cols=4096)


@pytest.mark.slow
def test_layer_ops_are_one_layers_kernels_with_their_chosen_configs():
    from gpusim.hardware import load_gpu
    ops, total = lg.layer_ops(lg.TINY, "decode", 1, 64, None, load_gpu("h200"))
    assert [o[0] for o in ops][:3] == ["attn_norm", "qkv_proj", "rope"] and len(ops) == 11
    assert total == pytest.approx(sum(o[4] for o in ops) + load_gpu("h200").sync_overhead_us)


@pytest.mark.slow
def test_without_a_gpu_it_says_so_in_one_line(capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present")
    with pytest.raises(SystemExit) as e:
        lg.main(["--out", "/nonexistent"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("layer_on_gpu.py: needs a CUDA GPU")
