"""Small scenario runs shared by the output tests (run once per session: each takes a few seconds)."""
import textwrap

import pytest

from gpusim.sweep.runner import run_scenario
from gpusim.sweep.scenario import load_scenario

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _run(tmp_path_factory, name, yaml_text):
    d = tmp_path_factory.mktemp(name)
    src = d / f"{name}.yaml"
    src.write_text(textwrap.dedent(yaml_text))
    sc = load_scenario(src)
    rows, krows = run_scenario(sc, d / "out", jobs=1, progress=False)
    return sc, rows, krows, d / "out"


@pytest.fixture(scope="session")
def attention(tmp_path_factory):
    return _run(tmp_path_factory, "attn", """
        name: attn
        gpu: h100
        kernel: attention_flash
        check: false
        params: {batch: 1, heads: 2, head_dim: 64}
        sweep:
          kernel: [attention_naive, attention_flash]
          seq_len: [256, 512]
        """)


@pytest.fixture(scope="session")
def tiles(tmp_path_factory):
    # head_dim 256, 3 stages: a CTA holds q [BM, 256] once and k, v [BN, 256] three times each (fp16)
    return _run(tmp_path_factory, "tiles", """
        name: tiles
        gpu: h100
        kernel: attention_flash
        check: false
        params: {batch: 1, heads: 2, head_dim: 256, num_stages: 3, seq_len: 256}
        sweep:
          BLOCK_M: [32, 64, 128, 256]
          BLOCK_N: [32, 64, 128, 256]
        """)


@pytest.fixture(scope="session")
def elementwise(tmp_path_factory):
    return _run(tmp_path_factory, "ew", """
        name: ew
        kernel: elementwise_chain
        check: false
        params: {BLOCK: 1024}
        sweep:
          gpu: [h100, a100]
          kernel: [elementwise_chain, elementwise_fused]
          n: [65536, 262144]
        """)


def is_png(p):
    return p.read_bytes()[:8] == PNG_MAGIC


def names(paths):
    return sorted(p.name for p in paths)
