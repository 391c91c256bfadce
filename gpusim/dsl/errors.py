"""Trace-time errors that name the user's file and line."""
from __future__ import annotations

import os
import sys


class TraceError(ValueError):
    """A kernel body used the DSL wrongly (shape mismatch, bad dtype, ...)."""


_DSL_DIR = os.path.dirname(os.path.abspath(__file__))


def user_site() -> str:
    """``file:line`` of the innermost caller outside gpusim.dsl (the user's kernel code)."""
    f = sys._getframe(1)
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if os.path.dirname(fn) != _DSL_DIR:
            try:
                fn = os.path.relpath(fn)
            except ValueError:
                pass
            return f"{fn}:{f.f_lineno}"
        f = f.f_back
    return "<unknown>"


def trace_error(msg: str) -> TraceError:
    """A TraceError prefixed with the ``file:line`` of the user's code that caused it."""
    return TraceError(f"{user_site()}: {msg}")
