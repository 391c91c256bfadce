"""Errors of the Triton front end: one line naming the construct and the kernel's source line."""
from __future__ import annotations

import os
import sys

from ...dsl.errors import TraceError

_GPUSIM_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KERNEL_FILES: set = set()       # source files of the functions being traced (kept while tracing)


class TritonTraceError(TraceError):
    """A Triton kernel uses a construct the front end cannot turn into gpusim's IR, or uses it wrongly."""


def _short(path: str) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return path


def kernel_site(tb=None) -> str:
    """``file:line`` of the innermost frame in a traced kernel's file (from ``tb`` when given, else
    the current stack), else of the innermost frame outside gpusim."""
    frames = []
    if tb is not None:
        while tb is not None:
            frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
            tb = tb.tb_next
        frames.reverse()
    else:
        f = sys._getframe(1)
        while f is not None:
            frames.append((f.f_code.co_filename, f.f_lineno))
            f = f.f_back
    for fn, line in frames:
        if os.path.abspath(fn) in KERNEL_FILES:
            return f"{_short(fn)}:{line}"
    for fn, line in frames:
        if not os.path.abspath(fn).startswith(_GPUSIM_DIR + os.sep):
            return f"{_short(fn)}:{line}"
    return "<unknown>"


def unsupported(what: str) -> TritonTraceError:
    """``file:line: not supported by gpusim's Triton front end: <what>``."""
    return TritonTraceError(f"{kernel_site()}: not supported by gpusim's Triton front end: {what}")


def misuse(msg: str) -> TritonTraceError:
    return TritonTraceError(f"{kernel_site()}: {msg}")
