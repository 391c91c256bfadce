"""Bad input, everywhere a user can give it (scenario YAML, GPU YAML, --set, CLI flags, API calls):
each case is exit code 2 (or the API's exception type) with exactly one line on stderr and no
traceback. Points that are well-formed but impossible (too big for HBM, breaking a Triton tile
rule) are not input errors: they are ``infeasible`` rows, decided before any simulation."""
import csv
import subprocess
import sys
from pathlib import Path

import pytest

from gpusim.backends.sim import under_load
from gpusim import simulate
from gpusim.cli import main
from gpusim.hardware import CONFIG_DIR, ConfigError
from gpusim.kernels import KernelParamError
from gpusim.precheck import WorkLimitError

REPO = Path(__file__).resolve().parent.parent
OK = "kernel: attention_flash\nparams: {batch: 1, heads: 1, seq_len: 128, head_dim: 16}\ncheck: false\n"
BOMB = ('a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
        + "".join(f"{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n" for p, c in zip("abcdefgh", "bcdefghi")))


def _one_line_exit_2(capsys, argv, needles):
    rc = main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2, err
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], f"{n!r} not in {lines[0]!r}"
    return lines[0]


def _gpu_text(old=None, new=None):
    text = (CONFIG_DIR / "h100-ideal.yaml").read_text()
    if old is not None:
        assert old in text, old
        text = text.replace(old, new)
    return text


# --------------------------------------------------------------------------- scenario YAML
SCENARIOS = [
    ("check yes", "kernel: attention_flash\ncheck: 'yes'\n", ["check", "'yes'", "auto, true or false"]),
    ("fidelity fastest", "kernel: attention_flash\nfidelity: fastest\n", ["fidelity", "'fastest'", "fast or full"]),
    ("seq_len 1e9 is a float", "kernel: attention_flash\nparams: {seq_len: 1e9}\n", ["params.seq_len", "1000000000.0", "integer"]),
    ("seq_len float", "kernel: attention_flash\nparams: {seq_len: 1.0e9}\n", ["params.seq_len", "integer"]),
    ("max_work negative", "kernel: attention_flash\nmax_work: -5\n", ["max_work", "-5", "positive number"]),
    ("max_work text", "kernel: attention_flash\nmax_work: lots\n", ["max_work", "'lots'", "positive number"]),
    ("max_work bool", "kernel: attention_flash\nmax_work: true\n", ["max_work", "True", "positive number"]),
    ("kernel is a list", "kernel: [attention_flash]\n", ["kernel", "unknown kernel"]),
    ("gpu is a number", "kernel: attention_flash\ngpu: 100\n", ["gpu", "got 100"]),
    ("empty name", "kernel: attention_flash\nname: ''\n", ["name", "non-empty string"]),
    ("description a list", "kernel: attention_flash\ndescription: [a, b]\n", ["description", "must be a string"]),
    ("causal maybe", "kernel: attention_flash\nparams: {causal: maybe}\n", ["params.causal", "'maybe'", "true or false"]),
    ("dtype number", "kernel: attention_flash\nparams: {dtype: 16}\n", ["params.dtype", "16", "string"]),
    ("num_warps 3", "kernel: attention_flash\nparams: {num_warps: 3}\n", ["params.num_warps", "got 3", "1, 2, 4, 8"]),
    ("swept num_warps 3", "kernel: matmul\nsweep: {num_warps: [4, 3]}\n", ["sweep.num_warps[1]", "got 3"]),
    ("bool for tile", "kernel: matmul\nparams: {BLOCK_M: true}\n", ["params.BLOCK_M", "True"]),
    ("null in a sweep", "kernel: attention_flash\nsweep: {seq_len: [512, null]}\n", ["sweep.seq_len[1]", "no value"]),
    ("negative in a sweep", "kernel: attention_flash\nsweep: {seq_len: [512, -1]}\n", ["sweep.seq_len[1]", "-1"]),
    ("sweep value a mapping", "kernel: attention_flash\nsweep: {seq_len: {a: 1}}\n", ["sweep.seq_len", "list"]),
    ("another kernel's param", "kernel: attention_flash\nparams: {n: 1024}\n", ["params.n", "does not take 'n'"]),
    ("tab indentation", "kernel: attention_flash\nparams:\n\tseq_len: 512\n", ["YAML syntax error"]),
    ("plain string file", "attention_flash\n", ["expected a mapping", "got a str"]),
    ("kernels typo", "kernels: attention_flash\n", ["kernels", "unknown key", "did you mean 'kernel'"]),
    ("missing GPU file", "kernel: attention_flash\ngpu: configs/nope.yaml\n", ["gpu", "nope.yaml", "file not found"]),
]


@pytest.mark.parametrize("text,needles", [c[1:] for c in SCENARIOS], ids=[c[0] for c in SCENARIOS])
def test_bad_scenario(tmp_path, capsys, text, needles):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    _one_line_exit_2(capsys, ["run", str(p), "--out", str(tmp_path / "out"), "--no-plots"], ["bad.yaml", *needles])
    assert not (tmp_path / "out").exists()


def test_duplicate_yaml_key(tmp_path, capsys):
    p = tmp_path / "bad.yaml"
    p.write_text("kernel: attention_flash\nparams: {seq_len: 512}\nparams: {seq_len: 1024}\n")
    _one_line_exit_2(capsys, ["run", str(p), "--no-plots"], ["bad.yaml", "params", "duplicate"])


def test_yaml_alias_bomb_is_refused_quickly(tmp_path):
    """A billion-laughs scenario must not hang or eat memory (run in a subprocess with a timeout)."""
    p = tmp_path / "bad.yaml"
    p.write_text(BOMB + "kernel: attention_flash\nparams: {seq_len: *i}\n")
    try:
        r = subprocess.run([sys.executable, "-m", "gpusim", "run", str(p), "--no-plots"], capture_output=True,
                           text=True, timeout=60, cwd=tmp_path, env=_env())
    except subprocess.TimeoutExpired:
        pytest.fail("gpusim run hung on a YAML alias bomb")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr


# --------------------------------------------------------------------------- GPU YAML
GPUS = [
    ("bandwidth in TB/s", ("hbm_read_bandwidth_bytes_per_s: 3.35e12", "hbm_read_bandwidth_bytes_per_s: 3.35"),
     ["hbm_read_bandwidth_bytes_per_s = 3.35: did you mean 3.35e12 (TB/s)?"]),
    ("clock in MHz", ("clock_hz: 1.83e9", "clock_hz: 1830"), ["clock_hz = 1830: did you mean 1830e6 (MHz)?"]),
    ("clock in GHz", ("clock_hz: 1.83e9", "clock_hz: 1.83"), ["clock_hz = 1.83: did you mean 1.83e9 (GHz)?"]),
    ("tensor peak in TFLOP/s", ("fp16: 989.0e12", "fp16: 989"), ["tensor_flops_per_s.fp16 = 989", "989e12"]),
    ("L2 in MiB", ("l2_bytes: 52428800", "l2_bytes: 50"), ["l2_bytes = 50", "(50 MiB)"]),
    ("SRAM in KiB", ("sram_bytes_per_sm: 233472", "sram_bytes_per_sm: 228"), ["sram_bytes_per_sm = 228", "KiB"]),
    ("HBM size in GiB", ("hbm_bytes: 85899345920", "hbm_bytes: 80"), ["hbm_bytes = 80", "(80 GiB)"]),
    ("absurd SM count", ("sm_count: 132", "sm_count: 100000"), ["sm_count = 100000", "plausible range"]),
    ("missing field", ("sm_count: 132\n", ""), ["missing field sm_count"]),
    ("missing fp32 tensor peak", ("fp32: 494.0e12, ", ""), ["tensor_flops_per_s needs an entry for fp32"]),
    ("per-CTA SRAM above per-SM", ("sram_bytes_per_cta_max: 232448", "sram_bytes_per_cta_max: 300000"),
     ["sram_bytes_per_cta_max cannot exceed sram_bytes_per_sm"]),
    ("SM count as text", ("sm_count: 132", "sm_count: many"), ["field sm_count", "'many'"]),
    ("negative launch overhead", ("launch_overhead_us: 3.0", "launch_overhead_us: -3"),
     ["launch_overhead_us", "-3"]),
    ("YAML syntax error", ("sm_count: 132", "sm_count: [132"), ["YAML syntax error"]),
]


@pytest.mark.parametrize("edit,needles", [c[1:] for c in GPUS], ids=[c[0] for c in GPUS])
def test_bad_gpu_yaml(tmp_path, capsys, edit, needles):
    g = tmp_path / "mygpu.yaml"
    g.write_text(_gpu_text(*edit))
    p = tmp_path / "bad.yaml"
    p.write_text(f"kernel: attention_flash\ngpu: {g}\n")
    line = _one_line_exit_2(capsys, ["run", str(p), "--no-plots"], ["bad.yaml", "mygpu.yaml", *needles])
    assert len(line) < 300


@pytest.mark.parametrize("content,needle", [("", "the file is empty"), ("- a\n- b\n", "got a list"),
                                            (BOMB + _gpu_text("sm_count: 132", "sm_count: *i"), "alias bomb")],
                         ids=["empty", "list", "alias bomb"])
def test_gpu_yaml_not_a_config(tmp_path, capsys, content, needle):
    g = tmp_path / "mygpu.yaml"
    g.write_text(content)
    p = tmp_path / "bad.yaml"
    p.write_text(f"kernel: attention_flash\ngpu: {g}\n")
    line = _one_line_exit_2(capsys, ["run", str(p), "--no-plots"], ["mygpu.yaml", needle])
    # bounded whatever the temporary directory's name (longer under pytest -n: .../popen-gw1/...)
    assert len(line.replace(str(tmp_path), "<tmp>")) < 200


def test_gpu_path_is_a_directory(tmp_path, capsys):
    p = tmp_path / "bad.yaml"
    p.write_text(f"kernel: attention_flash\ngpu: {tmp_path}/\n")
    _one_line_exit_2(capsys, ["run", str(p), "--no-plots"], ["bad.yaml", "is a directory"])


# --------------------------------------------------------------------------- --set
SETS = [
    (["--set", "params.seq_len"], ["--set", "expected KEY=VALUE"]),
    (["--set", "params.seq_len=[1,2"], ["params.seq_len", "not valid YAML"]),
    (["--set", "params.seq_len=abc"], ["params.seq_len", "'abc'", "integer"]),
    (["--set", "sweep=3"], ["sweep", "must be a mapping"]),
    (["--set", "params.head_dim.x=1"], ["params.head_dim", "not a mapping"]),
    (["--set", "max_work=0"], ["max_work", "positive number"]),
    (["--set", "check=sometimes"], ["check", "'sometimes'"]),
    (["--set", "=5"], ["empty field path"]),
    (["--set", "params.seqlen=5"], ["params.seqlen", "did you mean 'seq_len'"]),
    (["--set", "gpu=h1000"], ["gpu", "did you mean 'h100'"]),
]


@pytest.mark.parametrize("args,needles", SETS, ids=[a[1] for a, _ in SETS])
def test_bad_set(tmp_path, capsys, args, needles):
    p = tmp_path / "ok.yaml"
    p.write_text(OK)
    _one_line_exit_2(capsys, ["run", str(p), "--out", str(tmp_path / "o"), "--no-plots", *args], needles)


# --------------------------------------------------------------------------- CLI flags
def _ok(tmp_path):
    p = tmp_path / "ok.yaml"
    p.write_text(OK)
    return str(p)


FLAGS = [
    ("jobs 0", lambda t: ["run", _ok(t), "--jobs", "0"], ["--jobs", "at least 1"]),
    ("jobs text", lambda t: ["run", _ok(t), "--jobs", "many"], ["--jobs", "'many'"]),
    ("scheduler without dask", lambda t: ["run", _ok(t), "--executor", "local", "--scheduler", "x:1"],
     ["--scheduler", "only used with --executor dask"]),
    ("dask without scheduler", lambda t: ["run", _ok(t), "--executor", "dask"], ["--executor dask needs --scheduler"]),
    ("bad plot format", lambda t: ["run", _ok(t), "--format", "jpg"], ["--format", "'jpg'"]),
    ("unknown subcommand", lambda t: ["simulate"], ["invalid choice", "'simulate'"]),
    ("no subcommand", lambda t: [], ["required"]),
    ("run without scenario", lambda t: ["run"], ["required", "scenario"]),
    ("unknown flag", lambda t: ["run", _ok(t), "--fast"], ["unrecognized arguments", "--fast"]),
    ("missing scenario file", lambda t: ["run", str(t / "nope.yaml")], ["nope.yaml", "file not found"]),
    ("timeline over a sweep", lambda t: ["run", _ok(t), "--timeline", "--set", "sweep.seq_len=[128,256]"],
     ["--timeline needs a single point"]),
    ("triton-source head_dim 3", lambda t: ["triton-source", "attention_flash", "--set", "head_dim=3"],
     ["triton-source attention_flash", "tl.dot needs every dimension >= 16"]),
    ("triton-source naive causal", lambda t: ["triton-source", "attention_naive", "--set", "causal=true"],
     ["attention_naive", "causal"]),
    ("triton-source unknown kernel", lambda t: ["triton-source", "flash"], ["unknown kernel 'flash'"]),
    ("triton-source bad value", lambda t: ["triton-source", "matmul", "--set", "M=abc"], ["M", "integer"]),
    ("triton-source no =", lambda t: ["triton-source", "matmul", "--set", "M"], ["expected NAME=VALUE"]),
    ("triton-source unknown param", lambda t: ["triton-source", "matmul", "--set", "seqlen=5"],
     ["does not take parameter 'seqlen'"]),
    ("triton-source block over 2**20", lambda t: ["triton-source", "attention_naive", "--set", "seq_len=4194304"],
     ["softmax", "2**20"]),
    ("out under a file", lambda t: ["run", _ok(t), "--out", str(_afile(t) / "sub")], ["--out", "cannot write"]),
]


def _afile(t):
    f = t / "afile"
    f.write_text("x")
    return f


@pytest.mark.parametrize("argv,needles", [c[1:] for c in FLAGS], ids=[c[0] for c in FLAGS])
def test_bad_flags(tmp_path, capsys, argv, needles):
    a = argv(tmp_path)
    try:
        _one_line_exit_2(capsys, a, needles)
    except SystemExit as e:      # argparse exits by itself: same contract
        err = capsys.readouterr().err
        lines = [x for x in err.splitlines() if x.strip()]
        assert e.code == 2 and len(lines) == 1 and "Traceback" not in err, err
        for n in needles:
            assert n in lines[0], f"{n!r} not in {lines[0]!r}"


def test_jobs_1000_is_a_warning_not_an_error(tmp_path, capsys):
    rc = main(["run", _ok(tmp_path), "--out", str(tmp_path / "o"), "--no-plots", "--jobs", "1000"])
    err = capsys.readouterr().err
    assert rc == 0, err
    warn = [x for x in err.splitlines() if x.startswith("gpusim: warning")]
    assert len(warn) == 1 and "--jobs 1000" in warn[0] and "Traceback" not in err


def _env():
    import os

    return {**os.environ, "PYTHONPATH": str(REPO)}


@pytest.mark.parametrize("argv,needle", [
    (["triton-source", "attention_flash", "--set", "head_dim=3"], "tl.dot needs every dimension >= 16"),
    (["triton-source", "attention_naive", "--set", "causal=true"], "causal"),
], ids=["head_dim 3", "naive causal"])
def test_triton_source_errors_in_a_real_process(argv, needle):
    r = subprocess.run([sys.executable, "-m", "gpusim", *argv], capture_output=True, text=True, env=_env(),
                       timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr, r.stderr


# --------------------------------------------------------------------------- API calls
class _NoSim:
    def __init__(self, *a, **k):
        raise AssertionError("the simulator was started")


API = [
    ("check yes", dict(check="yes"), ValueError, "check must be True, False or 'auto', got 'yes'"),
    ("fidelity fastest", dict(fidelity="fastest"), ValueError, "fidelity must be 'fast' or 'full'"),
    ("max_work zero", dict(max_work=0), ValueError, "max_work must be a positive number"),
    ("unknown kernel", dict(kernel="flash_attn"), KernelParamError, "unknown kernel 'flash_attn'"),
    ("unknown gpu", dict(gpu="h1000"), ConfigError, "did you mean 'h100'"),
    ("missing gpu file", dict(gpu="nope/gpu.yaml"), ConfigError, "file not found"),
    ("seq_len text", dict(seq_len="abc"), KernelParamError, "seq_len must be an integer"),
    ("head_dim negative", dict(head_dim=-1), KernelParamError, "head_dim must be a positive integer"),
    ("typo param", dict(seqlen=5), KernelParamError, "did you mean 'seq_len'"),
    ("work limit", dict(seq_len=1 << 24, batch=1, heads=1, gpu="h200"), WorkLimitError, "max_work=..."),
]


@pytest.mark.parametrize("kw,exc,needle", [c[1:] for c in API], ids=[c[0] for c in API])
def test_bad_api_call(monkeypatch, kw, exc, needle):
    monkeypatch.setattr(under_load, "LaunchSim", _NoSim)
    kw = dict(kw)
    kernel = kw.pop("kernel", "attention_flash")
    with pytest.raises(exc) as e:
        simulate(kernel, **kw)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_another_kernels_params_in_the_api():
    with pytest.raises(KernelParamError) as e:
        simulate("matmul", seq_len=99, causal=True)
    assert "seq_len" in str(e.value) and "\n" not in str(e.value)


def test_gpu_yaml_bandwidth_in_the_api(tmp_path):
    g = tmp_path / "g.yaml"
    g.write_text(_gpu_text("hbm_read_bandwidth_bytes_per_s: 3.35e12", "hbm_read_bandwidth_bytes_per_s: 3.35"))
    with pytest.raises(ConfigError, match=r"did you mean 3\.35e12 \(TB/s\)\?"):
        simulate("attention_flash", gpu=str(g))


# --------------------------------------------------------------------------- impossible points
IMPOSSIBLE = [
    ("seq_len 10^9", "attention_flash", dict(seq_len=10**9), "GB of HBM, h100 has"),
    ("naive seq_len 10^9", "attention_naive", dict(seq_len=10**9), "GB of HBM, h100 has"),
    ("head_dim 3", "attention_flash", dict(head_dim=3), "tl.dot needs every dimension >= 16"),
    ("naive head_dim 3", "attention_naive", dict(head_dim=3), "tl.dot needs every dimension >= 16"),
]


@pytest.mark.parametrize("kernel,params,needle", [c[1:] for c in IMPOSSIBLE], ids=[c[0] for c in IMPOSSIBLE])
def test_impossible_point_is_infeasible_without_simulating(monkeypatch, kernel, params, needle):
    monkeypatch.setattr(under_load, "LaunchSim", _NoSim)
    r = simulate(kernel, "h100", **params)
    assert r.status == "infeasible" and needle in r.reason


def test_impossible_point_in_a_run_is_an_infeasible_row(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(under_load, "LaunchSim", _NoSim)
    p = tmp_path / "s.yaml"
    p.write_text("kernel: attention_flash\ngpu: h100\nsweep: {seq_len: [16777216]}\n")
    rc = main(["run", str(p), "--out", str(tmp_path / "o"), "--no-plots", "--jobs", "1"])
    capsys.readouterr()
    assert rc == 0
    row = next(csv.DictReader(open(tmp_path / "o" / "results.csv")))
    assert row["status"] == "infeasible" and "GB of HBM" in row["reason"]


# --------------------------------------------------------------------------- --help
def _subparsers():
    from gpusim.cli import build_parser

    ap = build_parser()
    action = next(a for a in ap._actions if a.__class__.__name__ == "_SubParsersAction")
    return action.choices


@pytest.mark.parametrize("cmd", ["gpus", "kernels", "run", "triton-source", "calibrate", "validate"])
def test_help_is_complete(cmd):
    sp = _subparsers()[cmd]
    assert sp.description, f"{cmd} has no description"
    for a in sp._actions:
        assert a.help, f"{cmd} {a.option_strings or a.dest} has no help"
