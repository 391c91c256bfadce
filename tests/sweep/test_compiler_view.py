"""The compiler's view is an explicit, named input: a point computed with one view (the analytic
estimate, or Triton's compiler at one version) is never served when another view is in force --
after installing, removing or upgrading triton, the same ``--out`` recomputes."""
import csv
import json

import pytest

from gpusim import compiler
from gpusim.toolchain import compile as tc
from gpusim.hardware import load_gpu
from gpusim.output.tables import run_table
from gpusim.sweep import runner
from gpusim.sweep.runner import run_scenario
from gpusim.sweep.scenario import load_scenario

_real_run_point = runner.run_point


def _view(monkeypatch, installed: str | None):
    """Pretend triton ``installed`` (a version) is importable here, or that none is."""
    monkeypatch.setattr(tc, "available", lambda: installed is not None)
    monkeypatch.setattr(tc, "triton_version", lambda: installed)


@pytest.mark.parametrize("installed, expect", [(None, "estimate"), ("3.6.0", "triton 3.6.0"),
                                                ("3.9.0", "triton 3.9.0")])
def test_auto_resolves_to_what_is_installed(monkeypatch, installed, expect):
    monkeypatch.setenv(compiler.RESOURCES_ENV, "auto")
    _view(monkeypatch, installed)
    assert compiler.view_name(load_gpu("h200")) == expect


def test_estimated_mode_and_archless_configs_use_the_estimate(monkeypatch):
    _view(monkeypatch, "3.9.0")
    monkeypatch.setenv(compiler.RESOURCES_ENV, "estimated")
    assert compiler.view_name(load_gpu("h200")) == "estimate"
    monkeypatch.setenv(compiler.RESOURCES_ENV, "auto")
    assert compiler.view_name(load_gpu("h200").model_copy(update={"compute_capability": None})) == "estimate"


def _tagged(pt, timeline=False):
    """Run the point, and tag the row with the view in force, as a real compiled run would."""
    row, krows, r = _real_run_point(pt, timeline)
    return dict(row, compiler=compiler.view_name(pt.config)), krows, r


@pytest.mark.parametrize("first, second", [(None, "3.6.0"), ("3.6.0", None), ("3.6.0", "3.9.0")])
def test_rerun_after_the_compiler_changed_never_serves_old_rows(tmp_path, monkeypatch, first, second):
    p = tmp_path / "s.yaml"
    p.write_text("kernel: elementwise_fused\nsweep: {n: [1024, 2048]}\ncheck: false\n")
    out = tmp_path / "out"
    monkeypatch.setenv(compiler.RESOURCES_ENV, "auto")
    monkeypatch.setattr(runner, "run_point", _tagged)
    _view(monkeypatch, first)
    run_scenario(load_scenario(p), out, jobs=1)
    _view(monkeypatch, second)                     # triton installed, removed or upgraded
    run_scenario(load_scenario(p), out, jobs=1)
    assert json.loads((out / "manifest.json").read_text())["computed"] == 2
    want = "estimate" if second is None else f"triton {second}"
    assert {r["compiler"] for r in csv.DictReader(open(out / "results.csv"))} == {want}
    run_scenario(load_scenario(p), out, jobs=1)    # the same view again: served from the saved points
    assert json.loads((out / "manifest.json").read_text())["computed"] == 0


def test_the_run_table_names_the_view():
    rows = [{"gpu": "h200", "kernel": "k", "status": "ok", "time_us": 1.0, "compiler": "estimate"}]
    assert "compiler view: estimate" in run_table(rows, [])
    rows[0]["compiler"] = "triton 3.6.0"
    assert "compiler view: triton 3.6.0 (registers, spills" in run_table(rows, [])
