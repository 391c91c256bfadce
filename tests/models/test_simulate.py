import pytest

from gpusim.hardware import load_gpu
from gpusim.models import load_model, simulate_model
from gpusim.models.compose import model_ops


def test_llama3_70b_fp16_on_80gb_is_infeasible_with_its_bytes():
    r = simulate_model("llama3-70b", phase="decode", batch=1, context=1024, gpu="h100", dtype="fp16")
    assert r.status == "infeasible"
    assert "weights 131.4 GiB" in r.reason and "80.0 GiB of HBM" in r.reason and r.ops == []


def test_layer_has_every_op_and_gemm_bytes_match_weights():
    m = load_model("llama3-8b")
    ops = {o.name: o for o in model_ops(m, "decode", 1, 1024)}
    assert list(ops)[:4] == ["embedding", "attn_norm", "qkv_proj", "rope"]
    assert ops["attention"].kernel == "attention_decode" and ops["gate_up_proj"].count == 32
    p = dict(ops["gate_up_proj"].params)
    assert (p["M"], p["N"], p["K"]) == (1, 2 * 14336, 4096)
    with pytest.raises(ValueError, match="phase 'train'"):
        model_ops(m, "train", 1, 1)


def _decode_b1():
    m, cfg = load_model("llama3-8b"), load_gpu("h100")
    r = simulate_model(m, phase="decode", batch=1, context=1024, gpu=cfg)
    floor_us = (m.weight_bytes() + 1024 * m.kv_bytes_per_token()) / cfg.hbm_read_bandwidth_bytes_per_s * 1e6
    assert r.status == "ok"
    return r.time_us, floor_us


@pytest.mark.slow
def test_decode_batch1_no_faster_than_weights_and_kv_over_hbm():
    t, floor_us = _decode_b1()
    assert t >= floor_us


@pytest.mark.slow
def test_decode_batch1_within_1_5x_of_the_floor():
    t, floor_us = _decode_b1()
    assert t <= 1.5 * floor_us, f"{t:.0f} us against a floor of {floor_us:.0f} us"


def test_decode_gemms_run_as_gemv_with_a_split_alternative_and_prefill_as_wide_tiles():
    m = load_model("llama3-8b")
    ops = {o.name: o for o in model_ops(m, "decode", 1, 1024)}
    o = ops["o_proj"]
    assert o.kernel == "gemv_splitk" and o.fidelity == "full"
    p, alt = dict(o.params), dict(o.alternatives[0])
    assert (p["M"], p["N"], p["K"], p["SPLIT_K"]) == (1, 4096, 4096, 1)
    assert alt["SPLIT_K"] > 1 and 4096 // p["BLOCK_N"] * alt["SPLIT_K"] >= 2 * 132    # fills 2 CTAs per SM
    assert dict(ops["lm_head"].params)["BLOCK_N"] == 128 and not ops["lm_head"].alternatives   # 1002 CTAs
    assert model_ops(m, "decode", 17, 1024)[2].kernel == "matmul"
    pre = {o.name: o for o in model_ops(m, "prefill", 1, 8192)}
    g = dict(pre["gate_up_proj"].params)
    assert (g["BLOCK_M"], g["BLOCK_N"], g["num_warps"], g["num_stages"]) == (128, 256, 8, 4)
    from gpusim.models.compose import Target
    a100 = dict(model_ops(m, "prefill", 1, 8192, target=Target(108, 166912))[2].params)
    assert a100["num_stages"] == 3          # 4 stages of 128x64 + 64x256 bf16 tiles exceed 163 KiB
    b64 = dict(model_ops(m, "decode", 64, 1024, target=Target(108, 166912))[8].params)
    assert b64["BLOCK_M"] == 64             # 64 rows: no 128-row tiles, however many columns
    big = dict(pre["swiglu"].params)
    assert big["BLOCK"] == 8192 and "BLOCK" not in dict(ops["swiglu"].params)


TINY = dict(name="tiny", hidden=256, heads=4, kv_heads=2, head_dim=64, ffn=512, activation="swiglu",
            norm="rmsnorm", layers=2, vocab=1024)


def test_the_step_synchronises_once():
    cfg = load_gpu("h100")
    r = simulate_model(TINY, phase="decode", batch=1, context=64, gpu=cfg)
    assert r.status == "ok" and len(r.ops) == 14
    assert r.time_us == pytest.approx(sum(o.time_us for o in r.ops) + cfg.sync_overhead_us)
    assert all(o.time_us >= o.count * cfg.launch_overhead_us for o in r.ops)
