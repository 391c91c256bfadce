"""Every marked "real output" block of README.md and docs/*.md matches what its command prints now,
up to what legitimately varies (wall times, progress lines, temporary paths; see
benchmarks/regen_docs.py). A failure names the page, the line and the command; fix it with
``python benchmarks/regen_docs.py`` (or ``-k TEXT`` for one block) and read the diff."""
import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("regen_docs", ROOT / "benchmarks" / "regen_docs.py")
regen = importlib.util.module_from_spec(_spec)
sys.modules["regen_docs"] = regen
_spec.loader.exec_module(regen)

BLOCKS = regen.find_blocks()


def _param(b):
    marks = [pytest.mark.slow] if b.slow else []
    if "torch" in b.flags:
        marks.append(pytest.mark.skipif(not regen.has_torch(), reason="needs torch and triton"))
    return pytest.param(b, id=b.name, marks=marks)


def _produce(block, tmp_path_factory):
    """regen.produce, with one run of a command for all its blocks even when they land on different
    pytest-xdist workers (the essay script prints four tables in about a minute)."""
    if block.kind != "output" or "PYTEST_XDIST_WORKER" not in os.environ:
        return regen.produce(block)        # one process: regen_docs already runs a command once
    import fcntl
    shared = tmp_path_factory.getbasetemp().parent       # the session's folder, common to the workers
    stem = shared / f"docs_output_{hashlib.sha256(block.command.encode()).hexdigest()[:16]}"
    with open(f"{stem}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        saved = Path(f"{stem}.json")
        if saved.exists():
            regen._RUNS[block.command] = json.loads(saved.read_text())
        out = regen.produce(block)
        if not saved.exists():
            saved.write_text(json.dumps(regen._RUNS[block.command]))
    return out


@pytest.mark.parametrize("block", [_param(b) for b in BLOCKS])
def test_block_matches_what_the_code_prints(block, tmp_path_factory):
    diff = regen.differs(block, _produce(block, tmp_path_factory))
    assert not diff, f"{block.name} is stale; run `python benchmarks/regen_docs.py -k ...`:\n{diff}"


def test_the_pages_have_marked_blocks():
    docs = {b.doc.name for b in BLOCKS}
    assert {"README.md", "write-your-own-kernel.md"} <= docs
    assert any(b.slow for b in BLOCKS) and any(not b.slow for b in BLOCKS)


# ------------------------------------------------------------------- the script's own rules
def test_normalise_drops_what_varies_and_keeps_the_numbers():
    a = ("gpusim: 3/4 points (75%) in 00:06, 0.46 points/s, 00:02 left\n"
         " x  sim_wall_s  time_us\n-  ----------  -------\n1        1.23     10.9\n"
         "took 44.6 s; wrote /tmp/regen_docs_x/out0/results.csv")
    b = (" x  sim_wall_s  time_us\n-  ----------  -------\n1        9.87     10.9\n"
         "took 3 s; wrote /tmp/other/results.csv")
    assert regen.normalise(a) == regen.normalise(b)
    assert regen.normalise(a) != regen.normalise(b.replace("10.9", "11.0"))


def test_bad_marker_is_a_one_line_error(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("<!-- output(fast): gpusim gpus -->\n```\n```\n")
    regen.ROOT, old = tmp_path, regen.ROOT
    try:
        with pytest.raises(regen.DocMarkerError, match=r"x\.md:1: unknown flag"):
            regen.find_blocks([doc])
        doc.write_text("<!-- output: gpusim gpus -->\n\n```\n```\n")
        with pytest.raises(regen.DocMarkerError, match=r"x\.md:1: the marker must be"):
            regen.find_blocks([doc])
    finally:
        regen.ROOT = old


def test_rewrite_replaces_only_the_block(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("intro\n<!-- output: echo hi -->\n```\nold\nlines\n```\nafter\n")
    regen.ROOT, old = tmp_path, regen.ROOT
    try:
        (b,) = regen.find_blocks([doc])
        new = regen.produce(b)
        assert new == "hi" and regen.differs(b, new)
        regen.rewrite(doc, {b.line: (b, new)})
    finally:
        regen.ROOT = old
    assert doc.read_text() == "intro\n<!-- output: echo hi -->\n```\nhi\n```\nafter\n"


def test_table_block_is_the_nth_markdown_table(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text("<!-- output(table=2): printf '| a |\\n|---|\\ntext\\n| b |\\n|---|\\n| 2 |\\n' -->\n"
                   "| b |\n|---|\n| 1 |\nafter\n")
    regen.ROOT, old = tmp_path, regen.ROOT
    try:
        (b,) = regen.find_blocks([doc])
        new = regen.produce(b)
    finally:
        regen.ROOT = old
    assert b.text == "| b |\n|---|\n| 1 |" and new == "| b |\n|---|\n| 2 |"
    assert regen.differs(b, new)
