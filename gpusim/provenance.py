"""Which code produced a result: the git revision of the checkout gpusim runs from, whether it had
uncommitted changes, and a hash of the package's own source (what actually computed the numbers,
git or not). Each is computed once per process."""
from __future__ import annotations

import functools
import hashlib
import subprocess
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def _git(*args: str) -> str | None:
    """stdout of ``git ARGS`` run in the checkout that holds the package, or None if that fails."""
    try:
        r = subprocess.run(["git", *args], capture_output=True, text=True, timeout=5, cwd=PACKAGE_DIR.parent)
    except Exception:
        return None
    return r.stdout if r.returncode == 0 else None


def _own_checkout() -> bool:
    """True when the package's parent folder is a git checkout's root (not an enclosing repository)."""
    top = _git("rev-parse", "--show-toplevel")
    return bool(top) and Path(top.strip()).resolve() == PACKAGE_DIR.parent


def git_revision() -> str | None:
    """HEAD of the git checkout gpusim runs from, if it runs from one (not an enclosing repository)."""
    rev = _git("rev-parse", "HEAD")
    return rev.strip() if rev and _own_checkout() else None


@functools.lru_cache(maxsize=1)
def git_dirty() -> bool | None:
    """Whether tracked files of the package differ from HEAD (None outside a git checkout)."""
    if not _own_checkout():
        return None
    out = _git("status", "--porcelain", "--untracked-files=no", "--", PACKAGE_DIR.name)
    return None if out is None else bool(out.strip())


@functools.lru_cache(maxsize=1)
def code_hash() -> str:
    """sha256 (first 16 hex digits) over every ``.py`` file of the package and its shipped data
    (``data/*.json``: the prediction intervals), path and content, in path order. A change to any
    model code changes it, committed or not, so a cached result is only reused by the code that
    computed it."""
    h = hashlib.sha256()
    for p in sorted([*PACKAGE_DIR.rglob("*.py"), *PACKAGE_DIR.glob("data/*.json")]):
        rel = p.relative_to(PACKAGE_DIR).as_posix()
        if "__pycache__" in rel:
            continue
        h.update(rel.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def _revision_once() -> str | None:
    return git_revision()


def record() -> dict:
    """What every saved result carries: code hash, git revision and dirty flag, gpusim version."""
    from . import __version__

    return {"code_hash": code_hash(), "git_revision": _revision_once(), "git_dirty": git_dirty(),
            "gpusim_version": __version__}
