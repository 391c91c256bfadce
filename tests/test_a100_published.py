"""The published A100 numbers of benchmarks/a100_published.py load, and each says where it comes from."""
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def mod():
    spec = importlib.util.spec_from_file_location("a100_published", ROOT / "benchmarks" / "a100_published.py")
    m = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = m            # dataclasses look their module up while the class is made
    try:
        spec.loader.exec_module(m)
        yield m
    finally:
        sys.modules.pop(spec.name, None)


def test_every_published_number_loads_with_a_complete_source(mod):
    rows = mod.load()
    assert len(rows) >= 40
    for p in rows:
        src = mod.SOURCES[p.source]
        assert src["url"].startswith("https://") and src["title"] and src["where"] and src["gpu"], p
        assert p.kernel in mod.KINDS and p.value > 0 and p.unit in ("TFLOP/s", "ms", "GB/s"), p
    # every kind the comparison names is there: FA2 CUDA, Triton and PyTorch (FA2 paper), FA1, cuBLAS
    assert {p.kernel for p in rows} >= {"FA2 CUDA", "FlashAttention Triton", "PyTorch standard", "FA1 CUDA", "cuBLAS"}
    assert {p.source for p in rows} == set(mod.SOURCES)          # no source is listed without a number


def test_a_number_without_a_source_is_refused(mod, monkeypatch):
    bad = mod.Published("cuBLAS", dict(M=64, N=64, K=64), "fp16", 1.0, "TFLOP/s", "nowhere")
    monkeypatch.setattr(mod, "PUBLISHED", mod.PUBLISHED + [bad])
    with pytest.raises(ValueError, match="nowhere"):
        mod.load()


def test_flops_and_range_follow_the_sources_conventions(mod):
    fa2 = [p for p in mod.load() if p.source == "fa2-fig4" and p.kernel == "FA2 CUDA"
           and p.shape == dict(batch=4, heads=16, seq_len=4096, head_dim=128, causal=False)]
    assert len(fa2) == 1 and fa2[0].value == 196.0
    # 4 N^2 d H B x 3.5 (forward + backward), halved when causal
    assert mod.flops(fa2[0]) == pytest.approx(3.5 * 4 * 4 * 16 * 4096 ** 2 * 128)
    # a prediction between the published Triton (93) and FA2 (196) kernels is inside; 2x FA2 is not
    assert mod.verdict(fa2[0], 120.0, mod.load())[0] is True
    assert mod.verdict(fa2[0], 400.0, mod.load())[:2] == (False, "93-196")
    # a runtime in ms: the faster time is the larger speed
    t18 = [p for p in mod.load() if p.source == "fa1-table18" and p.kernel == "FA1 CUDA" and p.shape["seq_len"] == 4096]
    assert mod.ratio(t18[0], 8.42 / 2) == pytest.approx(2.0)
