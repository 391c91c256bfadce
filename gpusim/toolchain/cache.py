"""The on-disk cache of the Triton backend: a directory only this user can write, and generated
sources imported only after their content is checked against the hash in their file name.

``@triton.jit`` reads a function's source through ``inspect``, so a generated kernel has to live in
a real ``.py`` file before it is imported. Importing a file runs it, so the cache must not be a place
another user can write (on a shared GPU host ``/tmp`` is such a place): the directory is
``$GPUSIM_CACHE_DIR``, else ``$XDG_CACHE_HOME/gpusim``, else ``~/.cache/gpusim``; it is created
mode 0700 and refused when it belongs to another user or group/others can write to it. See
SECURITY.md.
"""
from __future__ import annotations

import hashlib
import linecache
import os
import stat
import sys
import types


class CacheDirError(RuntimeError):
    """The cache directory is not safe to import code from (owner or permissions)."""


def _uid() -> int:
    """The uid the ownership check compares against (a function so tests can stand in for root)."""
    return os.getuid()


def cache_root() -> str:
    """Path of the gpusim cache directory (not created or checked here)."""
    d = os.environ.get("GPUSIM_CACHE_DIR")
    if not d:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        d = os.path.join(base, "gpusim")
    return os.path.abspath(d)


def check_private(path: str) -> None:
    """Raise CacheDirError unless ``path`` is a directory (not a symlink) owned by this user that
    neither group nor others can write."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise CacheDirError(f"gpusim cache {path} is not a plain directory; remove it or set GPUSIM_CACHE_DIR")
    if st.st_uid != _uid():
        raise CacheDirError(f"gpusim cache {path} is owned by uid {st.st_uid}, not you (uid {_uid()}); "
                            f"set GPUSIM_CACHE_DIR to a directory of your own")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheDirError(f"gpusim cache {path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o}); "
                            f"run chmod 700 on it or set GPUSIM_CACHE_DIR")


def cache_dir(sub: str = "") -> str:
    """The checked cache directory (or its subdirectory ``sub``), created mode 0700 if missing."""
    root = cache_root()
    path = os.path.join(root, sub) if sub else root
    for d in ([root, path] if sub else [root]):
        if not os.path.lexists(d):
            os.makedirs(d, mode=0o700, exist_ok=True)
        check_private(d)
    return path


def digest(text: str) -> str:
    """Content hash used in cache file names (sha256, first 20 hex digits)."""
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def write_atomic(path: str, data: str) -> None:
    """Write ``data`` to ``path`` through a private temporary file and a rename."""
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(data)
    os.replace(tmp, path)


def _read(path: str):
    try:
        with open(path) as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


_MODULES: dict = {}


def interpreting() -> bool:
    """Whether Triton runs kernels in its interpreter (``TRITON_INTERPRET=1``, read when triton is imported)."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def import_source(source: str, tag: str = ""):
    """The module defined by ``source``, imported from ``<cache>/triton/gpusim_<hash>.py``.

    A file already there is imported only if its content is exactly ``source``; otherwise it is
    rewritten first. Modules are cached per process and ``tag`` (e.g. the interpreter mode, which
    ``triton.jit`` fixes when the module is imported)."""
    h = digest(source)
    key = (h, tag)
    if key not in _MODULES:
        path = os.path.join(cache_dir("triton"), f"gpusim_{h}.py")
        if _read(path) != source:
            write_atomic(path, source)
        modname = f"gpusim_triton_{h}_{tag or 'default'}"
        mod = types.ModuleType(modname)
        mod.__file__ = path
        # run the checked text itself, and let ``inspect`` (hence triton.jit) read that same text
        linecache.cache[path] = (len(source), None, source.splitlines(True), path)
        sys.modules[modname] = mod
        exec(compile(source, path, "exec"), mod.__dict__)
        _MODULES[key] = mod
    return _MODULES[key]
