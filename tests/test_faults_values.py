"""Values no run could use are refused at load: in a scenario file, in --set and in a sweep list,
one stderr line naming the file and the field, exit 2, no traceback, and the results already in
--out kept."""
from pathlib import Path

import pytest

from gpusim.cli import main
from gpusim.sweep.scenario import PARAM_BOUNDS, bound_problem

FLASH = "kernel: attention_flash\nparams: {batch: 1, heads: 2, seq_len: 256}\n"
HUGE = "100000000000000000000000000000"      # 1e29 written as a YAML integer


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    """An --out with one finished run in it, whose saved points must survive a refused run."""
    d = tmp_path_factory.mktemp("done")
    s = d / "good.yaml"
    s.write_text("kernel: elementwise_fused\nsweep: {n: [1024]}\n")
    out = d / "out"
    assert main(["run", str(s), "--out", str(out), "--no-plots", "--jobs", "1"]) == 0
    return out, {p.name: p.read_bytes() for p in (out / "points").glob("*.json")}


def _refused(capsys, argv, done, *words):
    out, saved = done
    assert main(argv + ["--out", str(out), "--no-plots"]) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in lines[0], (w, lines[0])
    assert {p.name: p.read_bytes() for p in (out / "points").glob("*.json")} == saved
    return lines[0]


BAD_PARAMS = [("seq_len", HUGE), ("seq_len", "1e29"), ("seq_len", str((1 << 24) + 1)), ("kv_heads", "-1"),
              ("window", "1e20"), ("window", "100000000000000000000"), ("window", "-3"), ("batch", str(1 << 21)),
              ("heads", "0"), ("head_dim", "-64"), ("seq_len", "0")]


@pytest.mark.parametrize("name,value", BAD_PARAMS)
def test_bad_value_in_the_scenario_file(tmp_path, capsys, done, name, value):
    s = tmp_path / "bad.yaml"
    params = {"batch": "1", "heads": "2", "seq_len": "256", name: value}
    s.write_text("kernel: attention_flash\nparams: {" + ", ".join(f"{k}: {v}" for k, v in params.items()) + "}\n")
    _refused(capsys, ["run", str(s)], done, "bad.yaml", f"params.{name}")


@pytest.mark.parametrize("name,value", BAD_PARAMS[:7])
def test_bad_value_from_set(tmp_path, capsys, done, name, value):
    s = tmp_path / "s.yaml"
    s.write_text(FLASH)
    _refused(capsys, ["run", str(s), "--set", f"params.{name}={value}"], done, "s.yaml", f"params.{name}", "--set")


@pytest.mark.parametrize("name,value", BAD_PARAMS[:7])
def test_bad_value_in_a_sweep(tmp_path, capsys, done, name, value):
    s = tmp_path / "s.yaml"
    s.write_text(FLASH + f"sweep: {{{name}: [{1 if name != 'window' else 0}, {value}]}}\n")
    _refused(capsys, ["run", str(s)], done, "s.yaml", f"sweep.{name}[1]")


@pytest.mark.parametrize("field,value,why", [
    ("l2_line_bytes", "100", "power of two"), ("l2_line_bytes", "512", "l2_line_bytes"),
    ("l2_line_bytes", "0", "l2_line_bytes"), ("l2_bytes", "-1", "l2_bytes"), ("sm_count", "0", "sm_count"),
    ("hbm_bytes", "1e30", "hbm_bytes"), ("clock_hz", ".nan", "clock_hz"), ("clock_hz", ".inf", "clock_hz"),
    ("idle_power_w", "800", "power_limit_w"), ("sram_bytes_per_sm", "-4096", "sram_bytes_per_sm")])
def test_bad_gpu_value_in_yaml_set_and_sweep(tmp_path, capsys, done, field, value, why):
    from gpusim.hardware import CONFIG_DIR

    text = "".join(ln for ln in (CONFIG_DIR / "h100.yaml").read_text().splitlines(keepends=True)
                   if not ln.startswith(f"{field}:"))
    (tmp_path / "g.yaml").write_text(text + f"{field}: {value}\n")
    s = tmp_path / "s.yaml"
    s.write_text("kernel: elementwise_fused\ngpu: g.yaml\nparams: {n: 4096}\n")
    _refused(capsys, ["run", str(s)], done, "g.yaml", why)
    s.write_text("kernel: elementwise_fused\nparams: {n: 4096}\n")
    _refused(capsys, ["run", str(s), "--set", f"gpu.{field}={value}"], done, "s.yaml", "--set", why)
    s.write_text(f"kernel: elementwise_fused\nparams: {{n: 4096}}\nsweep: {{gpu.{field}: [{value}]}}\n")
    _refused(capsys, ["run", str(s)], done, "s.yaml", f"sweep.gpu.{field}[0]", why)


def test_bounds_hold_every_shipped_default():
    """The bounds refuse no built-in kernel's default, and each bound's ends are allowed."""
    from gpusim.kernels import KERNELS

    for k in KERNELS.values():
        for p in k.params:
            assert bound_problem(p.name, p.default) is None, (k.name, p.name)
    for name, (lo, hi) in PARAM_BOUNDS.items():
        assert bound_problem(name, lo) is None and bound_problem(name, hi) is None
        assert bound_problem(name, hi + 1) and bound_problem(name, lo - 1)
    assert bound_problem("user_param", 1 << 64) and bound_problem("eps", float("inf"))


@pytest.mark.parametrize("value", ["[" * 3000 + "]" * 3000, "{a: " * 3000 + "1" + "}" * 3000])
def test_set_nested_too_deeply_is_one_line(tmp_path, capsys, done, value):
    """A --set value nested 3,000 deep gave a RecursionError traceback of thousands of lines."""
    s = tmp_path / "s.yaml"
    s.write_text(FLASH)
    line = _refused(capsys, ["run", str(s), "--set", f"params={value}"], done, "--set", "nested too deeply")
    assert len(line) < 300


@pytest.mark.parametrize("text,where", [
    ("kernel: attention_flash\nparams: {batch: 1, heads: 16, seq_len: 256, kv_heads: 3}\n", "params.kv_heads"),
    ("kernel: attention_decode\nparams: {batch: 1, heads: 16}\nsweep: {kv_heads: [4, 5]}\n", "sweep.kv_heads")])
def test_kv_heads_that_do_not_divide_heads_are_refused_at_load(tmp_path, capsys, done, text, where):
    """Every point of such a scenario was an error row with exit 1; now one line at load, exit 2."""
    s = tmp_path / "kv.yaml"
    s.write_text(text)
    _refused(capsys, ["run", str(s)], done, "kv.yaml", where, "must divide heads = 16")


@pytest.mark.parametrize("body,where", [
    ("batch: 1\nseq_len: " + HUGE + "\n", "'seq_len'"), ("batch: 1\nseq_len: -1\n", "'seq_len'"),
    ("batch: 0\nseq_len: 1024\n", "'batch'"), ("batch: 1\nseq_len: 1024\nsweep: {seq_len: [1024, -5]}\n",
                                              "'sweep.seq_len[1]'")])
def test_bad_value_in_a_model_scenario(tmp_path, capsys, done, body, where):
    """seq_len -1 said 'rows must be a positive integer' without file or field; 1e29 tokens gave an
    infeasible row asking for 2e25 GiB."""
    s = tmp_path / "m.yaml"
    s.write_text("name: m\nmodel: llama3-8b\nphase: prefill\n" + body)
    _refused(capsys, ["run", str(s)], done, "m.yaml", where, "outside the range a run can use")


@pytest.mark.parametrize("kind", ["dev_zero", "fifo", "duplicate_key"])
def test_bad_model_file_is_one_line(tmp_path, capsys, done, kind):
    """A model scenario's `model:` file was read with no size cap or file-type check (a FIFO hung,
    /dev/zero grew without bound) and YAML 1.1 rules (a key given twice kept the last)."""
    import os

    from gpusim.models.spec import PRESETS

    if kind == "dev_zero":
        model = "/dev/zero"
    elif kind == "fifo":
        model = str(tmp_path / "f.yaml")
        os.mkfifo(model)
    else:
        model = str(tmp_path / "dup.yaml")
        text = (PRESETS / "llama3-8b.yaml").read_text()
        open(model, "w").write(text + text.splitlines()[-1] + "\n")
    s = tmp_path / "m.yaml"
    s.write_text(f"name: m\nmodel: {model}\nphase: prefill\nbatch: 1\nseq_len: 1024\n")
    _refused(capsys, ["run", str(s)], done, Path(model).name)
