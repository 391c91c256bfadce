"""Regenerate every "real output" block in README.md and docs/*.md from the command it shows.

    python benchmarks/regen_docs.py            # rewrite the blocks that changed, in place
    python benchmarks/regen_docs.py --check    # report the blocks that differ; exit 1 if any
    python benchmarks/regen_docs.py --fast     # leave out the blocks marked slow
    python benchmarks/regen_docs.py -k rmsnorm # only blocks whose doc or command contains the text

A block is found by an HTML comment on the line right before its opening fence (invisible when the
markdown is rendered):

    <!-- output: gpusim kernels scenarios/kernels/rmsnorm.py -->
    <!-- output(prompt): gpusim run scenarios/examples/rmsnorm.yaml --out {tmp:/tmp/ex_r} --no-plots -->
    <!-- output(slow): gpusim run scenarios/flash_vs_naive.yaml --out {tmp:results/flash_vs_naive} -->
    <!-- code: docs/snippets/run_from_python.py -->

``output``: the block is the command's stdout (progress lines and ``wrote ...`` go to stderr and are
not shown). Flags in parentheses: ``prompt`` starts the block with ``$ COMMAND``; ``slow`` marks an
expensive block (``--fast`` and the default test run leave it out); ``torch`` a block that needs
torch and triton (skipped, and said so, where they are not installed). ``{tmp}`` in the command is a
fresh temporary directory; ``{tmp:SHOWN}`` shows it as SHOWN in the prompt and in the output.
``table=N`` on a marker right before a markdown table (``| ... |`` lines, no fence): the table is
the N-th markdown table the command prints (a command that prints a page's tables runs once for all
of them; such scripts also rewrite their figures, as they do when run by hand).
``code``: the block is the named file (a snippet that an ``output: python FILE`` block runs), so the
code a page shows is the code that printed its output.

Commands run in the repository root under bash, with ``gpusim`` and ``python`` meaning this
interpreter (``python -m gpusim``), ``PYTHONPATH`` set to the repository and
``GPUSIM_RESOURCES=estimated`` (the analytic register estimate, which needs no triton and is what
the pages show; a command may set it itself).

What legitimately varies is normalised before comparing (``normalise``): progress lines
(``gpusim: 3/4 points ... points/s ... left``), elapsed times (``in 00:05``, ``took 44.6 s``,
``201 s``), the ``sim_wall_s`` column of a printed table, and temporary paths. Every other
character, every simulated number included, must match. A block whose text still matches up to
these is left as it is, so a rewrite only touches blocks that really changed.
"""
from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!-- (output|code)(?:\(([a-z0-9=, ]*)\))?: (.+?) -->\s*$")
TMP = re.compile(r"\{tmp(?::([^}]*))?\}")
FLAGS = {"prompt", "slow", "torch"}
TIMEOUT_S = 1800


class MissingDependency(RuntimeError):
    """A ``torch`` block where torch or triton is not installed."""


def has_torch() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("torch", "triton"))


class DocMarkerError(ValueError):
    """A marker that cannot be used: names the file, the line and what is allowed."""


@dataclass
class Block:
    doc: Path            # the markdown file
    line: int            # 0-based index of the marker line
    kind: str            # "output" or "code"
    command: str         # the command (output) or the file (code), as written in the marker
    flags: frozenset = field(default_factory=frozenset)
    start: int = 0       # index of the first line inside the fence
    end: int = 0         # index of the closing fence
    text: str = ""       # what the page shows now

    @property
    def table(self) -> int:
        """N of a ``table=N`` flag (the block is the N-th markdown table of the output), else 0."""
        return next((int(f[6:]) for f in self.flags if f.startswith("table=")), 0)

    @property
    def slow(self) -> bool:
        return "slow" in self.flags

    @property
    def name(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line + 1} {self.shown_command}"

    @property
    def shown_command(self) -> str:
        return TMP.sub(lambda m: m.group(1) or "/tmp/out", self.command)


def doc_files(root: Path = ROOT) -> list[Path]:
    return [root / "README.md"] + sorted((root / "docs").glob("*.md"))


def find_blocks(paths=None) -> list[Block]:
    """Every marked block of the given markdown files (default: README.md and docs/*.md)."""
    blocks = []
    for path in paths or doc_files():
        lines = Path(path).read_text().split("\n")
        for i, ln in enumerate(lines):
            if not ln.startswith("<!-- output") and not ln.startswith("<!-- code"):
                continue
            m = MARKER.match(ln)
            where = f"{Path(path).relative_to(ROOT)}:{i + 1}"
            if not m:
                raise DocMarkerError(f"{where}: a marker reads <!-- output: COMMAND -->, "
                                     "<!-- output(prompt,slow): COMMAND --> or <!-- code: FILE -->")
            flags = frozenset(f.strip() for f in (m.group(2) or "").split(",") if f.strip())
            bad = {f for f in flags if f not in FLAGS and not re.fullmatch(r"table=[1-9][0-9]*", f)}
            if bad:
                raise DocMarkerError(f"{where}: unknown flag(s) {sorted(bad)}; allowed: {sorted(FLAGS)}, table=N")
            if any(f.startswith("table=") for f in flags):
                end = next((j for j in range(i + 1, len(lines)) if not lines[j].startswith("|")), len(lines))
                if end == i + 1:
                    raise DocMarkerError(f"{where}: a table=N marker must be on the line right before a | table")
                blocks.append(Block(Path(path), i, m.group(1), m.group(3).strip(), flags, i + 1, end,
                                    "\n".join(lines[i + 1:end])))
                continue
            if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
                raise DocMarkerError(f"{where}: the marker must be on the line right before a ``` fence")
            end = next((j for j in range(i + 2, len(lines)) if lines[j].startswith("```")), None)
            if end is None:
                raise DocMarkerError(f"{where}: the fenced block after the marker is never closed")
            blocks.append(Block(Path(path), i, m.group(1), m.group(3).strip(), flags, i + 2, end,
                                "\n".join(lines[i + 2:end])))
    return blocks


def _bin_dir(tmp: Path) -> Path:
    """A directory with ``gpusim`` and ``python`` that run this interpreter, for the commands' PATH."""
    d = tmp / "bin"
    d.mkdir(exist_ok=True)
    for name, tail in (("gpusim", ' -m gpusim "$@"'), ("python", ' "$@"'), ("python3", ' "$@"')):
        p = d / name
        p.write_text(f"#!/bin/sh\nexec {sys.executable}{tail}\n")
        p.chmod(0o755)
    return d


def produce(block: Block) -> str:
    """The text the block should hold: the file (code) or the command's stdout (output)."""
    if "torch" in block.flags and not has_torch():
        raise MissingDependency(f"{block.name}: needs torch and triton (pip install -e '.[gpu]')")
    if block.kind == "code":
        return (ROOT / block.command).read_text().rstrip("\n")
    out = run_command(block)
    if block.table:
        tables = [m.group(0) for m in re.finditer(r"^\|.*(?:\n\|.*)*", out, re.M)]
        if len(tables) < block.table:
            raise RuntimeError(f"{block.name}: the output has {len(tables)} markdown table(s), not {block.table}")
        return tables[block.table - 1]
    if "prompt" in block.flags:
        out = f"$ {block.shown_command}\n{out}"
    return out


_RUNS: dict[str, str] = {}      # command -> stdout, so that the tables of one command run it once


def run_command(block: Block) -> str:
    """The stdout of the block's command, run as the module docstring says (once per command)."""
    if block.command in _RUNS:
        return _RUNS[block.command]
    with tempfile.TemporaryDirectory(prefix="regen_docs_") as td:
        td = Path(td)
        shown = {}

        def tmp_dir(m):
            d = td / f"out{len(shown)}"
            shown[str(d)] = m.group(1) or "/tmp/out"
            return str(d)

        cmd = TMP.sub(tmp_dir, block.command)
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   PATH=str(_bin_dir(td)) + os.pathsep + os.environ.get("PATH", ""),
                   GPUSIM_RESOURCES=os.environ.get("GPUSIM_RESOURCES", "estimated"), MPLBACKEND="Agg")
        env.pop("TQDM_DISABLE", None)
        proc = subprocess.run(["bash", "-c", cmd], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
        out = proc.stdout
        for real, show in shown.items():
            out = out.replace(real, show)
    if proc.returncode != 0:
        raise RuntimeError(f"{block.name}: the command exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    out = "\n".join(ln.rstrip() for ln in out.rstrip("\n").split("\n"))
    _RUNS[block.command] = out
    return out


VARYING = [
    (re.compile(r"^gpusim: \d+/\d+ points.*\n?", re.M), ""),                   # progress lines
    (re.compile(r"\b\d+(\.\d+)? (s|ms) of wall time"), "<T> of wall time"),
    (re.compile(r"\btook \d+(\.\d+)? ?s\b"), "took <T>"),
    (re.compile(r"\bin \d+(\.\d+)? ?s\b"), "in <T>"),
    (re.compile(r"\bwhole script \d+(\.\d+)? s\b"), "whole script <T>"),
    (re.compile(r"(/tmp|/var/folders)/[^\s,]+"), "<TMP>"),
]


def _blank_column(text: str, name: str) -> str:
    """Blank the column ``name`` of every aligned table (a header line over a ``----  ---`` rule)."""
    lines = text.split("\n")
    for i in range(1, len(lines)):
        if not re.fullmatch(r"-+( +-+)*", lines[i]) or name not in lines[i - 1].split():
            continue
        spans = [m.span() for m in re.finditer(r"-+", lines[i])]
        col = lines[i - 1].split().index(name)
        a, b = spans[col] if col < len(spans) else (0, 0)
        gaps = [k for (_, e), (s2, _) in zip(spans, spans[1:]) for k in range(e, s2)]
        j = i + 1
        while j < len(lines) and lines[j].strip() and all(lines[j][k:k + 1] in ("", " ") for k in gaps):
            lines[j] = lines[j][:a] + " " * max(0, min(b, len(lines[j])) - a) + lines[j][b:]
            j += 1
    return "\n".join(lines)


def normalise(text: str) -> str:
    """The text with what legitimately varies from run to run replaced (see the module docstring)."""
    text = _blank_column(text, "sim_wall_s")
    for pat, rep in VARYING:
        text = pat.sub(rep, text)
    return "\n".join(ln.rstrip() for ln in text.split("\n")).strip("\n")


def differs(block: Block, new: str) -> str:
    """A unified diff of the block against ``new`` up to the normalised parts, or ''."""
    a, b = normalise(block.text), normalise(new)
    if a == b:
        return ""
    return "\n".join(difflib.unified_diff(block.text.split("\n"), new.split("\n"), "page", "command",
                                          lineterm="", n=1))


def rewrite(doc: Path, updates: dict[int, tuple[Block, str]]) -> None:
    """Replace the given blocks' contents (keyed by marker line) in ``doc``, bottom up."""
    lines = doc.read_text().split("\n")
    for _, (b, new) in sorted(updates.items(), reverse=True):
        lines[b.start:b.end] = new.split("\n")
    doc.write_text("\n".join(lines))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="report differing blocks, exit 1 if any")
    ap.add_argument("--fast", action="store_true", help="leave out the blocks marked slow")
    ap.add_argument("-k", dest="select", default="", help="only blocks whose name contains this")
    ap.add_argument("docs", nargs="*", type=Path, help="markdown files (default README.md, docs/*.md)")
    a = ap.parse_args(argv)
    try:
        blocks = find_blocks([p.resolve() for p in a.docs] or None)
    except DocMarkerError as e:
        print(f"regen_docs: {e}", file=sys.stderr)
        return 2
    blocks = [b for b in blocks if a.select in b.name and not (a.fast and b.slow)]
    changed, updates = [], {}
    for b in blocks:
        print(f"regen_docs: {b.name}", file=sys.stderr, flush=True)
        try:
            new = produce(b)
        except MissingDependency as e:
            print(f"regen_docs: skipped, {e}", file=sys.stderr)
            continue
        diff = differs(b, new)
        if diff:
            changed.append(b)
            updates.setdefault(b.doc, {})[b.line] = (b, new)
            if a.check:
                print(f"--- {b.name} differs:\n{diff}\n")
    if not a.check:
        for doc, up in updates.items():
            rewrite(doc, up)
    verb = "differ" if a.check else "rewritten"
    print(f"regen_docs: {len(blocks)} block(s), {len(changed)} {verb}"
          + "".join(f"\n  {b.name}" for b in changed), file=sys.stderr)
    return 1 if a.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
