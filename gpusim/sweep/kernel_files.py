"""Where a scenario's kernel comes from: a built-in name, ``path/to/file.py:name`` (relative to the
scenario file) or ``module:name``; what worker processes are given, and the part of the cache key
that changes when a kernel file or a module beside it is edited."""
from __future__ import annotations

import hashlib
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


def kernel_source_hash(name: str, base_dir: Path) -> str:
    """Hash of a kernel file's text and of every other ``.py`` file beside it (modules it may import:
    the file's folder is on ``sys.path`` while it is imported), part of the cache key: an edited
    kernel or helper module is re-simulated. "" for built-in and ``module:name`` kernels."""
    ref = kernel_ref(name, base_dir)
    where = ref.rpartition(":")[0]
    if where and (where.endswith(".py") or "/" in where):
        h = hashlib.sha256(Path(where).read_bytes())
        for f in sorted(Path(where).parent.glob("*.py")):
            if f.name != Path(where).name and f.is_file():
                h.update(f.name.encode() + b"\0" + f.read_bytes())
        return h.hexdigest()[:16]
    return ""
