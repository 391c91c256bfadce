"""Tensor parallelism, quantized storage and the NCCL collective model."""
import pytest

from gpusim.hardware import load_gpu
from gpusim.models import load_model, simulate_model
from gpusim.models.collectives import CollectiveError, collective_time
from gpusim.models.collectives_fit import errors, published_time_us
from gpusim.models.compose import memory_bytes, model_ops
from gpusim.models.nccl_published import CHECK, FIT, ROWS
from gpusim.models.serving import max_batch

GiB = 1 << 30


@pytest.fixture(scope="module")
def h100():
    return load_gpu("h100")


def test_all_reduce_within_15pct_of_published_figures_it_was_not_fitted_on(h100):
    checked = [(r, e) for r, _, _, e in errors(h100, CHECK) if (1 << 20) <= r[1] <= (1 << 30)]
    assert len(checked) >= 5 and not set(r for r, _ in checked) & set(FIT)
    worst = max(abs(e) for _, e in checked)
    assert worst < 0.15, worst
    # every published row, fitted or not, within 15%
    assert max(abs(e) for *_, e in errors(h100, ROWS)) < 0.15


def test_nccl_choice_follows_size_and_gpu_count(h100):
    small = collective_time(h100, "all_reduce", 8, 64 << 10)
    large = collective_time(h100, "all_reduce", 8, 256 << 20)
    assert (small.algorithm, small.protocol) == ("ring", "LL")
    assert (large.algorithm, large.protocol) == ("nvls", "Simple")
    # NVLS needs more than 4 GPUs: 4 GPUs run the ring
    assert collective_time(h100, "all_reduce", 4, 256 << 20).algorithm == "ring"
    # bus bandwidth at 1 GiB on 8 GPUs: the published 463.6 GB/s within 15%
    assert collective_time(h100, "all_reduce", 8, 1 << 30).bus_bandwidth == pytest.approx(463.58e9, rel=0.15)
    # a larger buffer never takes less time
    ts = [collective_time(h100, "all_reduce", 8, 1 << k).time_us for k in range(10, 31)]
    assert ts == sorted(ts)


def test_published_time_is_busbw_arithmetic():
    assert published_time_us((8, 1 << 30, 463.58, "", "")) == pytest.approx((1 << 30) / (463.58e9 / 1.75) * 1e6)


def test_collectives_refuse_what_the_node_cannot_do(h100):
    with pytest.raises(CollectiveError, match="gpus_per_node 8"):
        collective_time(h100, "all_reduce", 16, 1e6)
    bare = h100.model_copy(update={"nvlink_links": 0})
    with pytest.raises(CollectiveError, match="no NVLink fields"):
        collective_time(bare, "all_reduce", 2, 1e6)
    assert collective_time(h100, "all_reduce", 1, 1e6).time_us == 0.0


def test_tp1_ops_and_memory_unchanged():
    m = load_model("llama3-8b")
    assert model_ops(m, "decode", 4, 1024) == model_ops(m, "decode", 4, 1024, tp=1)
    mem = memory_bytes(m, "decode", 1, 1024)
    assert mem["weights"] == m.weight_bytes() and mem["kv_cache"] == 1025 * m.kv_bytes_per_token()


def test_tp8_splits_heads_ffn_vocab_and_adds_two_allreduces_per_layer():
    m = load_model("llama3-70b")
    ops = {o.name: o for o in model_ops(m, "decode", 8, 32768, tp=8)}
    qkv, down = dict(ops["qkv_proj"].params), dict(ops["down_proj"].params)
    assert qkv["N"] == (8 + 2 * 1) * 128 and (down["N"], down["K"]) == (8192, 28672 // 8)
    att = dict(ops["attention"].params)
    assert (att["heads"], att["kv_heads"]) == (8, 1)
    assert ops["attn_allreduce"].count == ops["mlp_allreduce"].count == 80
    assert dict(ops["attn_allreduce"].params)["bytes"] == 8 * 8192 * 2
    mem = memory_bytes(m, "decode", 8, 32768, tp=8)
    assert mem["kv_cache"] == pytest.approx(memory_bytes(m, "decode", 8, 32768)["kv_cache"] / 8)
    assert mem["weights"] == pytest.approx(m.weight_bytes() / 8, rel=0.01)
    with pytest.raises(ValueError, match="tp 3"):
        model_ops(m, "decode", 1, 16, tp=3)


def test_fp8_weights_on_one_h100_say_what_does_not_fit(h100):
    r = simulate_model("llama3-70b", phase="decode", batch=8, context=32768, gpu=h100, weight_dtype="fp8")
    assert r.status == "infeasible"
    assert "weights 67.7 GiB" in r.reason and "kv_cache 80.0 GiB" in r.reason
    # one 32K sequence fits beside the FP8 weights, two do not
    assert max_batch("llama3-70b", h100, 32768, weight_dtype="fp8") == 1
    assert max_batch("llama3-70b", h100, 32768, tp=8) > 8


def test_quantized_decode_gemv_streams_the_quantized_bytes():
    m = load_model("llama3-8b")
    full = {o.name: dict(o.params) for o in model_ops(m, "decode", 1, 1024)}
    int4 = {o.name: dict(o.params) for o in model_ops(m, "decode", 1, 1024, weight_bytes=0.5)}
    assert int4["gate_up_proj"]["N"] == full["gate_up_proj"]["N"] // 4
    assert int4["lm_head"] == full["lm_head"]          # the LM head stays in the model's dtype


@pytest.mark.slow
def test_tp1_total_is_unchanged_and_tp_adds_the_collectives():
    from gpusim.api import simulate

    r1 = simulate_model("llama3-8b", phase="decode", batch=1, context=1024, gpu="h100")
    # the composition before tensor parallelism: each op's fastest candidate, its launches without
    # the host sync, one sync for the step
    cfg = load_gpu("h100")
    before = cfg.sync_overhead_us
    for op in model_ops(load_model("llama3-8b"), "decode", 1, 1024):
        t = min(simulate(op.kernel, gpu=cfg, check=False, fidelity=op.fidelity, **dict(p)).time_us for p in op.candidates)
        before += (t - cfg.sync_overhead_us) * op.count
    assert r1.time_us == pytest.approx(before, rel=0.005)
    assert r1.time_us_lo < r1.time_us < r1.time_us_hi
    r2 = simulate_model("llama3-8b", phase="decode", batch=1, context=1024, gpu="h100", tp=2)
    comm = sum(o.time_us for o in r2.ops if o.kernel in ("all_reduce", "all_gather"))
    sync = load_gpu("h100").sync_overhead_us
    assert comm > 0 and r2.time_us == pytest.approx(sum(o.time_us for o in r2.ops) + sync)
    assert r2.time_us_lo < r2.time_us < r2.time_us_hi and r2.tokens_per_s_per_gpu == r2.tokens_per_s / 2
    r3 = simulate_model("llama3-8b", phase="decode", batch=1, context=1024, gpu="h100", tp=2, overlap=True)
    assert r3.time_us < r2.time_us


def _scenario(tmp_path, text):
    p = tmp_path / "m.yaml"
    p.write_text("name: m\nmodel: llama3-8b\n" + text)
    return p


def test_scenario_takes_gpu_fields_and_deployment(tmp_path):
    from gpusim.models import deploy, scenario

    p = _scenario(tmp_path, "phase: decode\ncontext: 1024\nsweep: {gpu.nccl_call_overhead_us: [0, 20]}\n")
    sc = scenario.load(p, ["gpu.hbm_bytes=256e9", "tp=4", "weight_dtype=fp8"])
    pts = scenario.points(sc)
    cfgs = [deploy.config_of(sc, q) for q in pts]
    assert [c.hbm_bytes for c in cfgs] == [256_000_000_000] * 2
    assert [c.nccl_call_overhead_us for c in cfgs] == [0, 20]
    cols = deploy.columns(sc, pts[1], cfgs[1])
    assert cols["gpu.hbm_bytes"] == 256_000_000_000 and cols["tp"] == 4 and cols["weight_dtype"] == "fp8"
    with pytest.raises(ValueError, match="'gpu_overrides.hbm_byte'.*did you mean 'hbm_bytes'"):
        scenario.load(p, ["gpu.hbm_byte=1"])
    with pytest.raises(ValueError, match="'tp': 3; allowed 1, 2, 4, 8"):
        scenario.load(p, ["tp=3"])
    with pytest.raises(ValueError, match="'sweep.weight_dtype\\[1\\]': fp4; allowed"):
        scenario.load(p, ["sweep.weight_dtype=[fp8, fp4]"])


@pytest.mark.slow
def test_printed_schema_validates_every_shipped_scenario_and_rejects_a_typo():
    import json
    from pathlib import Path

    jsonschema = pytest.importorskip("jsonschema")
    from gpusim.models.scenario import json_schema
    from gpusim.sweep.scenario import ScenarioFile
    from gpusim.yamlio import read_yaml

    schema = json_schema(ScenarioFile.model_json_schema())
    root = Path(__file__).resolve().parents[2]
    assert schema == json.loads((root / "docs" / "scenario.schema.json").read_text())
    files = sorted((root / "scenarios").rglob("*.yaml"))
    assert any("model" in read_yaml(f) for f in files)
    for f in files:
        jsonschema.validate(read_yaml(f), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"name": "x", "model": "llama3-8b", "phase": "decode", "tpp": 2}, schema)
