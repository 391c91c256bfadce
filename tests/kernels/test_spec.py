"""Kernels as objects: typed params, strict parameter checks, references carried by the
workload, and user kernels named by file or module."""
import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpusim import simulate
from gpusim.backends import numpy_exec
from gpusim.kernels import (KERNELS, Kernel, KernelParamError, Param, build, kernel, resolve_kernel, resolve_params)

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).resolve().parents[2]


def test_builtins_are_kernel_objects_in_the_old_order():
    assert list(KERNELS)[:5] == ["attention_naive", "attention_flash", "elementwise_chain", "elementwise_fused",
                                 "matmul"]
    assert all(isinstance(k, Kernel) and k.reference is not None for k in KERNELS.values())


@pytest.mark.parametrize("params, bad", [(dict(seq_len=99, causal=True), "seq_len"),
                                         (dict(seq_len=99999, BLOCK=64), "seq_len")])
def test_api_rejects_parameters_of_other_kernels(params, bad):
    with pytest.raises(KernelParamError, match=f"matmul does not take parameter '{bad}'.*it takes M, N, K"):
        simulate("matmul", **params)


def test_unknown_parameter_suggests_a_close_name():
    with pytest.raises(KernelParamError, match="did you mean 'seq_len'"):
        resolve_params("attention_flash", {"seqlen": 128})


def test_numpy_integers_and_bools_are_accepted():
    p = resolve_params("attention_flash", {"seq_len": np.int64(128), "causal": np.bool_(True)})
    assert p["seq_len"] == 128 and type(p["seq_len"]) is int and p["causal"] is True


def test_float_params_and_positive_check():
    k = Kernel("k", "", (Param("eps", float, 1e-6, "epsilon"),), lambda p: None)
    assert k.resolve({"eps": 1}) == {"eps": 1.0}
    with pytest.raises(KernelParamError, match="eps must be a positive number"):
        k.resolve({"eps": -1.0})
    with pytest.raises(KernelParamError, match="eps must be a number"):
        k.resolve({"eps": "x"})


@pytest.mark.parametrize("check", ["yes", 1, None, "true"])
def test_check_accepts_only_true_false_auto(check):
    with pytest.raises(ValueError, match="check must be True, False or 'auto'"):
        simulate("elementwise_fused", n=1024, check=check)


def test_workload_carries_its_reference_not_its_name():
    wl = build("matmul", dict(M=32, N=32, K=32, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16))
    renamed = dataclasses.replace(wl, name="attention_flash")     # the name must not matter
    assert numpy_exec.check(renamed) < 2e-3
    with pytest.raises(ValueError, match="has no reference"):
        numpy_exec.check(dataclasses.replace(wl, reference=None))


def test_user_kernel_by_file_module_and_object():
    by_file = resolve_kernel("data/user_kernels.py:double", base_dir=DATA.parent)
    assert by_file.name == "attention_double"
    assert resolve_kernel(by_file) is by_file
    assert resolve_kernel("gpusim.kernels.matmul:matmul") is KERNELS["matmul"]
    assert resolve_kernel(f"{DATA / 'user_kernels.py'}:double") is by_file      # absolute path, cached module


def test_user_kernel_named_like_attention_is_checked_against_its_own_reference():
    k = resolve_kernel("data/user_kernels.py:double", base_dir=DATA.parent)
    r = simulate(k, gpu="h100", n=512, check="auto")
    assert r.status == "ok" and r.max_rel_err is not None and r.max_rel_err < 1e-3
    with pytest.raises(KernelParamError, match="attention_double does not take parameter 'seq_len'"):
        simulate(k, seq_len=128)


@pytest.mark.parametrize("name, msg", [
    ("data/missing.py:k", "kernel file 'data/missing.py' not found"),
    ("data/user_kernels.py:nope", "has no 'nope'; its kernels: attention_double"),
    ("data/user_kernels.py:NOT_A_KERNEL", "NOT_A_KERNEL is a int, not a gpusim Kernel"),
    ("no_such_module_xyz:k", "cannot import module 'no_such_module_xyz'"),
    ("matmull", "did you mean 'matmul'"),
])
def test_bad_kernel_names_are_one_line_errors(name, msg):
    with pytest.raises(KernelParamError, match=msg) as e:
        resolve_kernel(name, base_dir=DATA.parent)
    assert "\n" not in str(e.value)


def test_kernel_file_with_an_error_names_the_line(tmp_path):
    f = tmp_path / "broken.py"
    f.write_text("x = 1\ny = undefined_name\n")
    with pytest.raises(KernelParamError, match=r"broken.py:2: error while importing .*NameError"):
        resolve_kernel(f"{f}:k")


def test_decorator_defaults_name_and_help():
    @kernel(params=(Param("n", int, 4, "n"),))
    def my_kernel(p):
        """First line of help.

        More."""

    assert my_kernel.name == "my_kernel" and my_kernel.help == "First line of help."


def test_cli_kernels_lists_a_files_kernels():
    env = {"PYTHONPATH": str(REPO)}
    res = subprocess.run([sys.executable, "-m", "gpusim", "kernels", "tests/kernels/data/user_kernels.py"],
                         cwd=REPO, env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "tests/kernels/data/user_kernels.py:double -> attention_double: y = 2 x" in res.stdout
    assert "scale       float default 2.0" in res.stdout
    bad = subprocess.run([sys.executable, "-m", "gpusim", "kernels", "nope.py"], cwd=REPO, env=env,
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "nope.py" in bad.stderr
