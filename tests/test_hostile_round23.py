"""Hostile inputs that used to give tracebacks, silent wrong answers, stale results or hangs: each is
one line on stderr with exit code 2 (or the API's exception, or an error row naming file and line)."""
import gzip
import time
import tomllib
from pathlib import Path

import pytest

from gpusim.cli import main
from gpusim.dsl.errors import TraceError
from gpusim.errors import ScenarioError
from gpusim.hardware import ConfigError, GPUConfig, load_gpu
from gpusim.kernels import KernelParamError
from gpusim.kernels.spec import resolve_kernel
from gpusim.kernels.time_limit import TIME_LIMIT_ENV, TimeLimitError
from gpusim.models.spec import ModelError, load_model
from gpusim.sweep.kernel_files import kernel_source_hash
from gpusim.yamlio import parse_value

REPO = Path(__file__).resolve().parent.parent
OK = "kernel: attention_flash\nparams: {batch: 1, heads: 1, seq_len: 128, head_dim: 16}\ncheck: false\n"


def _one_line(capsys, argv, *needles):
    rc = main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in lines[0], f"{n!r} not in {lines[0]!r}"
    return lines[0]


# --------------------------------------------------------------------------- tracebacks
@pytest.mark.parametrize("flag,item,needle", [
    ("--space", "BLOCK_M=[64", "not valid YAML"), ("--set", "M=[1", "not valid YAML"),
    ("--set", "M=!!python/object/apply:os.system [echo]", "YAML tag"), ("--set", "M=\t1", "not valid YAML")])
def test_tune_values_are_parsed_strictly(capsys, flag, item, needle):
    _one_line(capsys, ["tune", "matmul", flag, item], f"tune {flag}", needle)


def test_parse_value_is_the_one_strict_parser():
    assert parse_value("[64, 128]", "x") == [64, 128] and parse_value("1e9", "x") == 1e9
    assert parse_value("yes", "x") == "yes" and parse_value("true", "x") is True       # YAML 1.2
    with pytest.raises(ScenarioError, match=r"^--space 'B=\[': value '\[' is not valid YAML"):
        parse_value("[", "--space 'B=['")


def test_reanalyze_of_a_truncated_gzip(tmp_path, capsys):
    d = tmp_path / "v"
    d.mkdir()
    full = gzip.compress(b'{"points": [' + b'{"kernel": "matmul"}, ' * 2000 + b"{}]}")
    (d / "validation.json.gz").write_bytes(full[:len(full) // 2])
    _one_line(capsys, ["validate", "--reanalyze", str(d)], "validation.json.gz", "not a complete gzip file")
    (d / "validation.json.gz").write_bytes(gzip.compress(b"[1, 2]"))
    _one_line(capsys, ["validate", "--reanalyze", str(d)], "not a validation.json")


@pytest.mark.parametrize("field,value", [("sm_count", 0), ("sm_count", True), ("clock_hz", -1.0),
                                         ("compute_capability", 100)])
def test_assigning_a_bad_gpu_field_is_refused(field, value):
    cfg = load_gpu("h100")
    with pytest.raises(ValueError, match=field):
        setattr(cfg, field, value)
    assert getattr(cfg, field) == getattr(load_gpu("h100"), field)


# --------------------------------------------------------------------------- silent accepts
def test_true_is_no_number_in_a_gpu_field(tmp_path, capsys):
    s = tmp_path / "s.yaml"
    s.write_text(OK)
    _one_line(capsys, ["run", str(s), "--set", "gpu.sm_count=true", "--out", str(tmp_path / "o")],
              "gpu.sm_count=true", "sm_count = true", "a number goes here")
    data = load_gpu("h100").model_dump()
    data["tensor_flops_per_s"]["fp16"] = True
    with pytest.raises(ValueError, match="tensor_flops_per_s.fp16 = true"):
        GPUConfig.model_validate(data)
    assert not (tmp_path / "o").exists()


def test_true_is_no_number_in_a_model(tmp_path):
    text = (REPO / "gpusim/models/presets/llama3-8b.yaml").read_text()
    assert "layers: 32" in text
    (tmp_path / "m.yaml").write_text(text.replace("layers: 32", "layers: true"))
    with pytest.raises(ModelError, match="'layers'"):
        load_model(tmp_path / "m.yaml")


@pytest.mark.parametrize("text,needles", [
    ("phase: decode\ncontext: 64\nseq_len: 512\n", ["'seq_len'", "phase decode does not read seq_len", "context"]),
    ("phase: prefill\nseq_len: 64\nsweep: {context: [64]}\n", ["'sweep.context'", "reads seq_len"]),
    ("phase: prefill\nsweep: {seq_len: [256, 256, 256]}\n", ["'sweep.seq_len[1]'", "listed twice"]),
    ("phase: decode\ncontext: 64\nbatch: true\n", ["'batch'", "integer"])])
def test_model_scenario_fields_it_would_ignore(tmp_path, capsys, text, needles):
    s = tmp_path / "m.yaml"
    s.write_text("name: m\nmodel: llama3-8b\n" + text)
    _one_line(capsys, ["run", str(s), "--out", str(tmp_path / "o"), "--no-plots"], "m.yaml", *needles)


@pytest.mark.parametrize("sweep,needle", [("{seq_len: [256, 256, 256]}", "sweep.seq_len[1]: 256 is listed twice"),
                                          ("{zip: {seq_len: [128, 256, 128], head_dim: [16, 16, 16]}}",
                                           "sweep.zip[2]: the values (128, 16) are listed twice")])
def test_a_sweep_value_listed_twice(tmp_path, capsys, sweep, needle):
    s = tmp_path / "s.yaml"
    s.write_text(OK + f"sweep: {sweep}\n")
    _one_line(capsys, ["run", str(s), "--out", str(tmp_path / "o")], needle)


ROWSUM = '''
from gpusim.dsl import load, program_id, store, trace
from gpusim.dsl.ir import Launch, TensorArg, Workload
from gpusim.kernels import Param, kernel


def body(x, y, *, BLOCK):
    t = load(x, (program_id(0), 0), (1, BLOCK))
    store(y, (program_id(0), 0), t)


@kernel(params=(Param("rows", int, 64, "rows"), Param("cols", int, 256, "cols"), Param("out", int, 1, "y cols")))
def rowsum(p):
    t = {"x": TensorArg("x", (p["rows"], p["cols"]), "fp16"), "y": TensorArg("y", (p["rows"], p["out"]), "fp16")}
    prog = trace(body, "rowsum", [t["x"], t["y"]], num_warps=4, BLOCK=256)
    return Workload("rowsum", t, ("x",), ("y",), (Launch("rowsum", prog, (p["rows"],), {n: n for n in t}),), p)
'''


def test_a_store_past_the_declared_output_is_a_trace_error(tmp_path):
    f = tmp_path / "rowsum.py"
    f.write_text(ROWSUM)
    k = resolve_kernel(f"{f}:rowsum")
    with pytest.raises(TraceError, match=r"rowsum.py:9: store to y of shape \(64, 1\): the \(1, 256\) tile .* "
                                         r"drops 255 of its 256 values"):
        k.build({})
    assert k.build({"out": 256}).outputs == ("y",)        # the whole row declared: fine


# --------------------------------------------------------------------------- stale results
def test_a_helper_in_a_sub_folder_is_part_of_the_key(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "__init__.py").write_text("")
    (tmp_path / "sub" / "h2.py").write_text("SCALE = 1\n")
    (tmp_path / "far").mkdir()
    (tmp_path / "far" / "unused.py").write_text("X = 1\n")
    (tmp_path / "kern.py").write_text("def k(p):\n    from sub.h2 import SCALE\n    return SCALE\n")
    before = kernel_source_hash("kern.py:k", tmp_path)
    (tmp_path / "far" / "unused.py").write_text("X = 2\n")       # not imported: the key stays
    assert kernel_source_hash("kern.py:k", tmp_path) == before
    (tmp_path / "sub" / "h2.py").write_text("SCALE = 16\n")
    assert kernel_source_hash("kern.py:k", tmp_path) != before


# --------------------------------------------------------------------------- hangs
def test_an_endless_loop_at_import_ends_at_the_limit(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(TIME_LIMIT_ENV, "0.3")
    (tmp_path / "spin.py").write_text("x = 0\nwhile True:\n    x += 1\n")
    t0 = time.monotonic()
    _one_line(capsys, ["kernels", str(tmp_path / "spin.py")], "spin.py", "limit of 0.3 s", "spin.py:", TIME_LIMIT_ENV)
    assert time.monotonic() - t0 < 5


def test_an_endless_loop_in_a_builder_ends_at_the_limit(tmp_path, monkeypatch):
    monkeypatch.setenv(TIME_LIMIT_ENV, "0.3")
    (tmp_path / "spinb.py").write_text(
        "from gpusim.kernels import kernel\n@kernel()\ndef k(p):\n    while True:\n        try:\n"
        "            pass\n        except Exception:\n            pass\n")
    k = resolve_kernel(f"{tmp_path / 'spinb.py'}:k")
    with pytest.raises(TimeLimitError, match=r"kernel k: its builder ran longer than the limit of 0.3 s"):
        k.build({})


# --------------------------------------------------------------------------- --out, echoes, architectures
def test_out_is_checked_before_any_work(tmp_path, capsys):
    s = tmp_path / "s.yaml"
    s.write_text(OK)
    (tmp_path / "f").write_text("")
    _one_line(capsys, ["run", str(s), "--out", str(tmp_path / "f")], "--out", "cannot write there", "not a directory")
    _one_line(capsys, ["run", str(s), "--out", str(tmp_path / "f" / "sub")], "is a file")
    assert not (tmp_path / "f" / "sub").exists() and (tmp_path / "f").read_text() == ""


def test_messages_never_echo_a_files_text(tmp_path, capsys):
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:secret-password-line\n")
    (tmp_path / "link.yaml").symlink_to(secret)
    s = tmp_path / "s.yaml"
    s.write_text(OK + f"gpu: {tmp_path / 'link.yaml'}\n")
    for argv in (["run", str(tmp_path / "link.yaml")], ["run", str(s)]):
        line = _one_line(capsys, argv + ["--out", str(tmp_path / "o")], "got a str")
        assert "secret" not in line.replace(str(tmp_path), "") and "root:x" not in line


def test_an_architecture_the_model_lacks_is_refused(tmp_path):
    text = (REPO / "configs/h100.yaml").read_text().replace("compute_capability: 90", "compute_capability: 100")
    (tmp_path / "b200.yaml").write_text(text)
    with pytest.raises(ConfigError, match=r"compute_capability = 100: not modeled: .*tcgen05.* 90 \(Hopper\)"):
        load_gpu(tmp_path / "b200.yaml")


# --------------------------------------------------------------------------- the house
def test_every_dependency_is_pinned_below_the_next_major():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + [d for ds in project["optional-dependencies"].values() for d in ds]
    assert deps and all("<" in d and ">=" in d for d in deps), [d for d in deps if "<" not in d]
    assert any(d.startswith("pandas") for d in project["dependencies"])     # model scenarios need it
