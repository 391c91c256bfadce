"""The timing model stays readable: no function in gpusim/backends/sim is longer than 60 lines."""
import ast
from pathlib import Path

SIM = Path(__file__).resolve().parents[3] / "gpusim" / "backends" / "sim"
MAX_LINES = 60


def test_no_long_functions():
    long = []
    files = sorted(SIM.glob("*.py"))
    assert any(f.name == "engine.py" for f in files)
    for f in files:
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_LINES:
                    long.append(f"{f.name}:{node.lineno} {node.name} ({n} lines)")
    assert not long, long
