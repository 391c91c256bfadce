"""User kernels from files: the ALiBi and RMSNorm examples of docs/write-your-own-kernel.md and a
sliding-window attention kernel, exact (<= 2e-3 norm-wise vs float64) on numpy and in the Triton
interpreter, and run through simulate() by file name and as objects."""
import os
from pathlib import Path

import numpy as np
import pytest

DEVICE = os.environ.get("GPUSIM_TRITON_TEST_DEVICE", "cpu")
if DEVICE == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"     # must be set before triton is imported

from gpusim import simulate  # noqa: E402
from gpusim.backends import numpy_exec  # noqa: E402
from gpusim.kernels import resolve_kernel  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TOL = 2e-3
ALIBI = dict(batch=2, heads=3, seq_len=100, head_dim=32, BLOCK_M=32, BLOCK_N=16)
CASES = [("scenarios/kernels/alibi.py:alibi_attention", dict(ALIBI, causal=True)),
         ("scenarios/kernels/alibi.py:alibi_attention", dict(ALIBI, causal=False)),
         ("tests/kernels/data/sliding_window.py:sliding_window", dict(window=24)),
         ("tests/kernels/data/sliding_window.py:sliding_window", dict(window=40, seq_len=128)),
         ("scenarios/kernels/rmsnorm.py:rms_norm", dict(rows=37, cols=300))]


@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
@pytest.mark.parametrize("name, params", CASES)
def test_exact_on_numpy(name, params, dtype):
    wl = resolve_kernel(name, base_dir=REPO).build(dict(params, dtype=dtype))
    assert numpy_exec.check(wl, seed=1) <= TOL


@pytest.mark.parametrize("name, params", CASES)
def test_exact_in_triton_interpreter(name, params):
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    from gpusim.backends.triton import run as tb

    wl = resolve_kernel(name, base_dir=REPO).build(dict(params, dtype="fp16"))
    inputs = numpy_exec.random_inputs(wl, 2)
    out = tb.run_workload(wl, inputs, device=DEVICE)
    ref = numpy_exec.reference(wl, inputs)
    for o in wl.outputs:
        assert numpy_exec.max_rel_err(out[o], ref[o]) <= TOL


def test_alibi_bias_is_not_plain_attention():
    """The reference is the kernel's own: ALiBi differs from plain attention by far more than TOL."""
    from gpusim.kernels.attention import attention_reference

    wl = resolve_kernel("scenarios/kernels/alibi.py:alibi_attention", base_dir=REPO).build(dict(ALIBI, causal=True))
    x = numpy_exec.random_inputs(wl, 0)
    plain = attention_reference({k: np.asarray(v, np.float64) for k, v in x.items()}, {"causal": True})["o"]
    assert numpy_exec.max_rel_err(numpy_exec.reference(wl, x)["o"], plain) > 0.05


def test_simulate_by_file_name_checks_automatically():
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        r = simulate("scenarios/kernels/alibi.py:alibi_attention", gpu="h100", **dict(ALIBI, causal=True))
    finally:
        os.chdir(cwd)
    assert r.status == "ok" and r.kernel == "alibi_attention"
    assert r.max_rel_err is not None and r.max_rel_err <= TOL


@pytest.mark.parametrize("yaml_name", ["alibi.yaml", "rmsnorm.yaml"])
def test_example_scenarios_name_a_kernel_file_relative_to_themselves(yaml_name):
    """The example scenarios' kernel, params and sweep resolve (base_dir = the scenario's folder),
    and the smallest point is exact."""
    import yaml

    path = REPO / "scenarios" / "examples" / yaml_name
    data = yaml.safe_load(path.read_text())
    k = resolve_kernel(data["kernel"], base_dir=path.parent)
    assert data["check"] is True
    small = {name: min(vals) for name, vals in data["sweep"].items()}
    wl = k.build(dict(data["params"], **small))
    assert numpy_exec.check(wl) <= TOL
