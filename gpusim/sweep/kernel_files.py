"""Where a scenario's kernel comes from: a built-in name, ``path/to/file.py:name`` (relative to the
scenario file) or ``module:name``; what worker processes are given, and the part of the cache key
that changes when a kernel file or a module of its own tree that it imports is edited."""
from __future__ import annotations

import ast
import hashlib
import sys
from pathlib import Path


def is_file_kernel(name) -> bool:
    return isinstance(name, str) and ":" in name


def kernel_ref(name: str, base_dir: Path) -> str:
    """What a worker process passes to ``simulate``: a kernel file's path made absolute (workers
    may run elsewhere in the tree); built-in and ``module:name`` kernels as given."""
    where, _, attr = name.rpartition(":")
    if where and (where.endswith(".py") or "/" in where) and not Path(where).is_absolute():
        return f"{(base_dir / where).resolve()}:{attr}"
    return name


MAX_HASHED_FILES = 1000     # a kernel's own tree of helpers is a handful of modules


def _static_imports(f: Path, root: Path) -> set:
    """The ``.py`` files under ``root`` that ``f``'s import statements (at any depth, functions
    included) can name: ``a.b`` as ``a/b.py`` or ``a/b/__init__.py`` with its packages' ``__init__``,
    ``from a import b`` also as the module ``a/b``; relative imports from ``f``'s folder."""
    try:
        tree = ast.parse(f.read_bytes())
    except (SyntaxError, ValueError, OSError):
        return set()            # the import itself reports it
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [(root, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = root if not node.level else f.parent.joinpath(*[".."] * (node.level - 1))
            mod = node.module or ""
            names += [(base, mod)] + [(base, f"{mod}.{a.name}".strip(".")) for a in node.names]
    out = set()
    for base, dotted in names:
        parts = [x for x in dotted.split(".") if x]
        for i in range(1, len(parts) + 1):
            d = base.joinpath(*parts[:i])
            out |= {c for c in (d.with_suffix(".py"), d / "__init__.py") if c.is_file()}
    return {r for r in (c.resolve() for c in out) if r.is_relative_to(root)}


def _loaded_under(root: Path) -> set:
    """The source files of modules this process has loaded from under ``root`` (imports a
    static reading cannot see, such as ``importlib.import_module``), leaving out installed
    packages and gpusim itself (whose version is part of every key)."""
    skip = [Path(x).resolve() for x in {sys.prefix, sys.base_prefix, sys.exec_prefix}]
    skip.append(Path(__file__).resolve().parents[1])
    out, prefix = set(), str(root)
    for m in list(sys.modules.values()):
        f = getattr(m, "__file__", None)
        if not isinstance(f, str) or not f.endswith(".py") or not f.startswith(prefix):
            continue                 # imported from the kernel's folder: under the path put on sys.path
        f = Path(f).resolve()
        if f.is_relative_to(root) and not any(f.is_relative_to(s) for s in skip) and "site-packages" not in f.parts:
            out.add(f)
    return out


def kernel_source_files(path: Path) -> list:
    """The kernel file, every ``.py`` file beside it (its folder is on ``sys.path`` while it is
    imported) and every module under its folder that it imports, directly or through another such
    module (read from the import statements, and from what this process has loaded from there)."""
    path = path.resolve()
    root = path.parent
    gpusim_dir = Path(__file__).resolve().parents[1]
    found = {path} | {f.resolve() for f in root.glob("*.py") if f.is_file()}
    todo = list(found)
    while todo and len(found) < MAX_HASHED_FILES:
        for f in _static_imports(todo.pop(), root) - found:
            if not f.is_relative_to(gpusim_dir):
                found.add(f)
                todo.append(f)
    found |= _loaded_under(root)
    return sorted(found, key=lambda f: f.relative_to(root).as_posix())


def kernel_source_hash(name: str, base_dir: Path) -> str:
    """Hash of a kernel file's text and of every module of its own tree it may import
    (``kernel_source_files``), part of the cache key: an edited kernel or helper module is
    re-simulated. "" for built-in and ``module:name`` kernels."""
    ref = kernel_ref(name, base_dir)
    where = ref.rpartition(":")[0]
    if where and (where.endswith(".py") or "/" in where):
        kernel = Path(where).resolve()
        h = hashlib.sha256(kernel.read_bytes())
        for f in kernel_source_files(kernel):
            if f != kernel:
                h.update(f.relative_to(kernel.parent).as_posix().encode() + b"\0" + f.read_bytes())
        return h.hexdigest()[:16]
    return ""
