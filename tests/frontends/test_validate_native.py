"""``gpusim validate`` on a user's Triton kernel, without a GPU: the launch it builds for the
unmodified kernel (arguments in signature order, launch options, grid), the check against the numpy
execution of the traced IR (full, or sampled programs), the measured point with stand-in runners,
the ncu kernel names, and the one-line refusal when no GPU is visible. The slow test runs the whole
validation with the kernel itself under Triton's interpreter in a child process."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("triton")

from gpusim.backends import numpy_exec  # noqa: E402
from gpusim.cli import main as cli_main  # noqa: E402
from gpusim.frontends.triton_trace import native  # noqa: E402
from gpusim.hw.validate import measure, ncu, run  # noqa: E402
from gpusim.hw.validate import user_kernels as uk  # noqa: E402
from gpusim.kernels import build as build_builtin  # noqa: E402

from .public_cases import ROOT, SCEN, SMALL, kernel_of, scenario  # noqa: E402


def small(name, **over):
    return kernel_of(name).build({**scenario(name)["params"], **SMALL[name], **over})


class FakeJIT:
    """Stands in for a JIT function: ``fn[grid](*args, **opts)`` records the launch."""

    def __init__(self, fn):
        self.fn, self.calls = fn, []

    def __getitem__(self, grid):
        return lambda *a, **k: self.calls.append((grid, a, k))


def test_a_traced_workload_carries_the_launch_of_the_users_kernel():
    nl = uk.native_launch(small("softmax"))
    assert nl.grid == (7,) and nl.num_warps == 8 and nl.num_stages == 4 and nl.kernel_name == "softmax_kernel"
    assert nl.tensors == {"output_ptr": ("fp32", (7, 781)), "input_ptr": ("fp32", (7, 781))}
    assert nl.scalars["BLOCK_SIZE"] == 1024 and nl.scalars["input_row_stride"] == 781
    wl = build_builtin("elementwise_chain", {"n": 256, "BLOCK": 128})
    assert uk.native_launch(wl) is None              # a DSL kernel runs through gpusim's generated source


def test_arguments_follow_the_signature_and_a_constexpr_launch_option_is_not_passed_twice():
    nl = uk.native_launch(small("softmax"))           # softmax_kernel takes num_stages as a constexpr
    fake = FakeJIT(nl.fn.fn if hasattr(nl.fn, "fn") else nl.fn)
    nl = native.NativeLaunch(fake, nl.tensors, nl.scalars, nl.grid, nl.num_warps, nl.num_stages)
    mem = {"output_ptr": "OUT", "input_ptr": "IN"}
    native.launcher(nl, mem)()
    grid, args, opts = fake.calls[0]
    assert grid == (7,) and opts == {"num_warps": 8}
    assert args == ("OUT", "IN", 781, 781, 7, 781, 1024, 4)
    va = uk.native_launch(small("vector_add"))
    assert native.launch_args(va, {"x_ptr": 1, "y_ptr": 2, "output_ptr": 3})[1] == {"num_warps": 4, "num_stages": 3}
    with pytest.raises(ValueError, match="no value for kernel argument.*y_ptr"):
        native.launch_args(va, {"x_ptr": 1, "output_ptr": 3})


def test_a_rows_kernel_is_checked_in_full_against_the_numpy_execution():
    wl = small("softmax")
    x = numpy_exec.random_inputs(wl, 1)
    refs, how = measure.sampled_reference(wl, x)
    full = numpy_exec.execute(wl, x)["output_ptr"]
    assert how == "full" and refs["output_ptr"][0] is Ellipsis
    np.testing.assert_array_equal(refs["output_ptr"][1], full)
    assert uk.tolerance(wl) == 1e-2 and uk.tolerance(small("rms_norm")) == 1e-2      # fp16 Y, fp32 RSTD


def test_a_dot_kernel_is_checked_on_the_elements_of_sampled_programs(monkeypatch):
    monkeypatch.setattr(uk, "SAMPLE_PROGRAMS", 3)
    wl = small("matmul")                               # 4 x 4 programs of 32 x 64
    x = numpy_exec.random_inputs(wl, 2)
    refs, how = measure.sampled_reference(wl, x, seed=5)
    idx, ref = refs["c_ptr"]
    assert how == "sampled" and ref.size == 3 * 32 * 64
    full = numpy_exec.execute(wl, x)["c_ptr"].astype(np.float64)
    np.testing.assert_array_equal(full[idx], ref)
    pids = uk.sample_programs(wl.launches[0].grid, 5, 3)
    assert pids[0] == (0, 0, 0) and pids[-1] == (15, 0, 0) and len(pids) == 3
    err, how = measure.check_outputs(wl, {"c_ptr": full * (1 + 1e-4)}, x, seed=5)
    assert how == "sampled" and 0 < err < 2e-4


def test_an_output_updated_in_place_is_compared_where_the_sampled_programs_changed_it(monkeypatch):
    monkeypatch.setattr(uk, "SAMPLE_PROGRAMS", 3)
    monkeypatch.setattr(uk, "FULL_PROGRAMS", 1)
    wl = small("rope")                                  # q and k rotated in place
    x = numpy_exec.random_inputs(wl, 0)
    refs, how = uk.traced_reference(wl, x, seed=1)
    full = numpy_exec.execute(wl, x)
    assert how == "sampled"
    for n, (idx, ref) in refs.items():
        assert 0 < ref.size < full[n].size and n in x
        np.testing.assert_array_equal(full[n].astype(np.float64)[idx], ref)


class NumpyRunner:
    """The traced IR's numpy execution as the 'GPU', its outputs scaled by ``scale``."""

    name = "numpy"

    def __init__(self, scale=1.0):
        self.scale, self.timed = scale, 0

    def run(self, wl, x):
        mem = numpy_exec.execute(wl, x)
        return {n: v * self.scale if n in wl.outputs else v for n, v in mem.items()}

    def time(self, wl, x):
        self.timed += 1
        return {"total_us": 10.0 + self.timed, "per_launch_us": {wl.launches[0].name: 10.0 + self.timed}}


def test_a_measured_point_is_checked_with_the_output_dtypes_tolerance_then_timed():
    params = {**scenario("softmax")["params"], **SMALL["softmax"]}
    kernel = str(SCEN / "kernels" / "softmax.py") + ":softmax_kernel"
    rec = measure.measure_point(kernel, params, NumpyRunner())
    assert rec["status"] == "ok" and rec["check"] == "full" and rec["max_rel_err"] == 0.0
    assert rec["tolerance"] == 1e-2 and rec["measured"]["total_us"] == [11.0, 12.0]
    bad = NumpyRunner(scale=1.02)
    rec = measure.measure_point(kernel, params, bad)
    assert rec["status"] == "wrong-result" and bad.timed == 0 and "0.02" in rec["reason"]


def test_ncu_expects_the_users_kernel_name():
    kernel = str(SCEN / "kernels" / "softmax.py") + ":softmax_kernel"
    assert ncu.expected_kernels(kernel, {**scenario("softmax")["params"], **SMALL["softmax"]}) == ["softmax_kernel"]


def test_without_a_gpu_validate_says_so_in_one_line_and_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(run, "gpu_problem", lambda: "no CUDA device visible to torch")
    code = cli_main(["validate", str(SCEN / "softmax.yaml"), "--out", str(tmp_path / "v"), "--no-ncu"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no CUDA device visible to torch" in err
    assert not (tmp_path / "v" / "validation.json").exists()


_CHILD = r"""
import json, sys, time
from pathlib import Path
from gpusim.hardware import load_gpu
from gpusim.hw.validate import analysis, report, run, user_kernels as uk
from gpusim.hw.validate.rows import build_rows
from gpusim.sweep.scenario import load_scenario

class Interpreter:            # the user's kernel on the CPU: Triton's interpreter, timed by the wall clock
    name = "interpreter"
    def run(self, wl, x):
        return uk.run(wl, x, device="cpu")
    def time(self, wl, x):
        def bench(go):
            t = time.perf_counter(); go(); return (time.perf_counter() - t) * 1e6
        return uk.time(wl, x, device="cpu", bench=bench)
    def environment(self):
        return {"backend": self.name, "device": "cpu"}

out = Path(sys.argv[2])
uk.SAMPLE_PROGRAMS = 5        # the small matmul's 16 programs are checked on a sample, as a large one's are
sc = load_scenario(sys.argv[1])
cfg = load_gpu("h100")
records, meta = run.run_validation(sc, cfg, out, Interpreter(), ncu=False, jobs=1)
rows = build_rows(records, cfg.name, list(sc.param_names))
report.write_report(out, rows, analysis.analyze(rows), meta)
print(json.dumps([{k: r.get(k) for k in ("status", "reason", "max_rel_err", "check", "measured", "predicted")}
                  for r in records], default=str))
"""


@pytest.mark.slow
def test_validate_runs_the_users_own_kernel_and_writes_the_dsl_report(tmp_path):
    """softmax and the grouped matmul, each the unmodified kernel under Triton's interpreter: checked
    against the traced IR's numpy execution (exact), timed, predicted, and reported as DSL kernels are."""
    import yaml

    pts = []
    for name in ("softmax", "matmul"):
        sc = scenario(name)
        sc["params"].update(SMALL[name])
        sc["kernel"] = str(SCEN / sc["kernel"])
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(sc))
        env = {**os.environ, "TRITON_INTERPRET": "1", "GPUSIM_RESOURCES": "estimated"}
        res = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(tmp_path / name)], capture_output=True,
                             text=True, env=env, cwd=ROOT, timeout=300)
        assert res.returncode == 0, res.stderr[-2000:]
        pts += json.loads(res.stdout.strip().splitlines()[-1])
        assert (tmp_path / name / "validation.csv").exists() and (tmp_path / name / "summary.md").exists()
    assert [p["status"] for p in pts] == ["ok", "ok"], pts
    assert [p["check"] for p in pts] == ["full", "sampled"]
    assert all(p["max_rel_err"] < 1e-6 and len(p["measured"]["total_us"]) == 2 for p in pts)
    assert all(p["predicted"]["status"] == "ok" for p in pts)
