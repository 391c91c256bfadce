"""Kernel specs that used to give tracebacks, run stdlib code or exit silently: each is one line,
exit 2 (KernelParamError in the API); a kernel file can import a helper module beside it."""
from pathlib import Path

import pytest

from gpusim.cli import main
from gpusim.kernels import KernelParamError
from gpusim.kernels.spec import resolve_kernel

def _one_line(err):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("spec", ["/etc/passwd:x", "..x:y", ".x:y", "x..y:k", "this:x", "antigravity:x",
                                  "os.path:join", "1abc:k", "a-b:k"])
def test_bad_kernel_spec_is_one_line(tmp_path, capsys, spec):
    s = tmp_path / "s.yaml"
    s.write_text(f"kernel: '{spec}'\nsweep: {{n: [1024]}}\n")
    assert main(["run", str(s), "--out", str(tmp_path / "out"), "--no-plots"]) == 2
    assert "kernel" in _one_line(capsys.readouterr().err)
    with pytest.raises(KernelParamError):
        resolve_kernel(spec)


@pytest.mark.parametrize("body", ["import sys\nsys.exit(0)", "raise SystemExit(3)", "raise SystemExit('bye')"])
def test_kernel_file_that_exits_is_an_error(tmp_path, body):
    f = tmp_path / "kx.py"
    f.write_text(body + "\n")
    with pytest.raises(KernelParamError, match="error while importing"):
        resolve_kernel(f"{f}:k")


def test_kernel_file_not_py_is_refused(tmp_path):
    f = tmp_path / "k.txt"
    f.write_text("k = 1\n")
    with pytest.raises(KernelParamError, match=r"\.py"):
        resolve_kernel(f"{f}:k")


def test_kernel_file_imports_a_helper_beside_it(tmp_path):
    import sys

    (tmp_path / "helper_mod_xyz.py").write_text("VALUE = 41\n")
    f = tmp_path / "kh.py"
    f.write_text("from helper_mod_xyz import VALUE\nfrom gpusim.kernels import KERNELS\nk = KERNELS['elementwise_fused']\n")
    assert resolve_kernel(f"{f}:k").name == "elementwise_fused"
    assert str(tmp_path) not in sys.path


def test_changed_helper_module_is_recomputed(tmp_path, capsys):
    """A kernel file importing a helper beside it: editing the helper changes the answer."""
    import csv

    kdir = tmp_path / "k"
    kdir.mkdir()
    (kdir / "helper_size_abc.py").write_text("SCALE = 1\n")
    (kdir / "kern.py").write_text(
        "import helper_size_abc\nfrom gpusim.kernels import KERNELS, kernel\nfrom gpusim.kernels.spec import Param\n"
        "@kernel(name='scaled', params=[Param('n', int, 1024, 'size')])\n"
        "def k(p):\n    return KERNELS['elementwise_fused'].build({**KERNELS['elementwise_fused'].resolve({}), "
        "'n': p['n'] * helper_size_abc.SCALE})\n")
    s = tmp_path / "s.yaml"
    s.write_text("kernel: k/kern.py:k\nsweep: {n: [4096]}\n")
    out = tmp_path / "out"

    def dram():  # a fresh process each time, as two `gpusim run`s are
        import os
        import subprocess
        import sys

        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
        r = subprocess.run([sys.executable, "-m", "gpusim", "run", str(s), "--out", str(out), "--no-plots"],
                           capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr
        rows = list(csv.DictReader(open(out / "results.csv")))
        assert rows[0]["status"] == "ok", rows
        return float(rows[0]["dram_read_bytes"])

    first = dram()
    (kdir / "helper_size_abc.py").write_text("SCALE = 16\n")
    assert dram() > 8 * first
