"""Which code produced a result: the git revision of the checkout gpusim runs from."""
from __future__ import annotations

import subprocess
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def git_revision() -> str | None:
    """HEAD of the git checkout gpusim runs from, if it runs from one (not an enclosing repository)."""
    root = PACKAGE_DIR.parent
    try:
        r = subprocess.run(["git", "rev-parse", "--show-toplevel", "HEAD"], capture_output=True, text=True,
                           timeout=5, cwd=root)
        top, rev = r.stdout.split()
        return rev if Path(top).resolve() == root else None
    except Exception:
        return None
