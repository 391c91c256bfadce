"""Trace a ``@triton.jit`` function into a gpusim ``ir.Program``.

The function's source is rewritten (``loops.rewrite``) and executed once, as Triton's interpreter
executes it, but with a ``tl`` whose functions record IR (``lang``): program ids and loop indices
stay symbolic, pointers are tensors plus symbolic offsets, and every load, store, dot, reduction and
elementwise op becomes an IR op. Helper ``@triton.jit`` functions the kernel calls are traced the
same way, inlined. Any failure is one ``TritonTraceError`` line naming the kernel file and line."""
from __future__ import annotations

import ast
import builtins
import inspect
import os
import re
import textwrap
import types

from ... import dsl
from ...dsl.errors import TraceError
from ...dsl.tiles import Tile
from . import lang
from .context import Ctx
from .errors import KERNEL_FILES, TritonTraceError, kernel_site, unsupported
from .loops import LOOP_FN, SourceError, rewrite, run_loop
from .memory import Ptr
from .symbolic import AInt, Lin, lmax, lmin
from .tiles import scalar_tile

_JIT_TYPES = ("JITFunction", "InterpretedFunction", "Autotuner", "Heuristics", "JITCallable")


def python_function(obj):
    """The Python function under a ``@triton.jit`` (also under autotune/heuristics wrappers)."""
    seen = 0
    while not isinstance(obj, types.FunctionType) and seen < 5:
        obj = getattr(obj, "fn", None)
        seen += 1
    if not isinstance(obj, types.FunctionType):
        raise TypeError("expected a @triton.jit function")
    return obj


def is_triton_function(obj) -> bool:
    return any(c.__name__ in _JIT_TYPES for c in type(obj).__mro__)


def _min(*a, **k):
    if len(a) == 2 and any(isinstance(x, (Lin, AInt, Tile)) for x in a):
        return lmin(*a) if all(isinstance(x, (int, Lin)) for x in a) else lang.minimum(*a)
    return builtins.min(*a, **k)


def _max(*a, **k):
    if len(a) == 2 and any(isinstance(x, (Lin, AInt, Tile)) for x in a):
        return lmax(*a) if all(isinstance(x, (int, Lin)) for x in a) else lang.maximum(*a)
    return builtins.max(*a, **k)


def _triton_ns():
    import math
    return lang._Namespace("triton", {"cdiv": lang.cdiv, "language": lang.TL,
                                      "next_power_of_2": lambda n: 1 << max(0, (int(n) - 1).bit_length()),
                                      "jit": lambda fn=None, **k: fn if fn is not None else (lambda f: f),
                                      "math": math})


def _shim(value, cache):
    """What a global of the kernel's module becomes inside the trace."""
    mod = getattr(value, "__name__", "") if isinstance(value, types.ModuleType) else None
    if mod is not None:
        if mod == "triton":
            return _triton_ns()
        if mod in ("triton.language", "triton.language.core"):
            return lang.TL
        if mod == "triton.language.math":
            return lang.MATH
        if mod.startswith("triton.language.extra"):
            return lang.LIBDEVICE if mod.endswith("libdevice") else lang.EXTRA
        return value if mod.split(".")[0] == "triton" else _ModuleShim(value, cache)
    if is_triton_function(value):
        return _helper(python_function(value), cache)
    if type(value).__name__ == "constexpr" and hasattr(value, "value"):
        return value.value
    if callable(value) and getattr(value, "__module__", "") and str(value.__module__).startswith("triton.language"):
        name = getattr(value, "__name__", "?")
        if name in lang.MEMBERS:
            return lang.MEMBERS[name]
        return _missing(name)
    return value


class _ModuleShim:
    """A module the kernel imports (``import my_helpers as h``): its attributes as the kernel's own
    globals become, so ``h.helper(x)`` inlines a ``@triton.jit`` helper and ``h.BLOCK`` reads a constexpr."""

    def __init__(self, module, cache):
        self._module, self._cache = module, cache

    def __getattr__(self, name):
        return _shim(getattr(self._module, name), self._cache)


def _missing(name):
    def f(*a, **k):
        raise unsupported(f"{name}")
    return f


def _helper(fn, cache):
    def call(*a, **k):
        return traced_function(fn, cache)(*a, **k)
    return call


def traced_function(fn, cache: dict):
    """``fn`` rewritten and compiled against the shimmed globals (cached per trace)."""
    if fn in cache:
        return cache[fn]
    file = inspect.getsourcefile(fn) or fn.__code__.co_filename
    KERNEL_FILES.add(os.path.abspath(file))
    lines, first = inspect.getsourcelines(fn)
    src = textwrap.dedent("".join(lines))
    tree = ast.parse(src)
    params = [a.arg for a in tree.body[0].args.args]
    try:
        tree = rewrite(tree, params)
    except SourceError as e:
        raise TritonTraceError(f"{os.path.relpath(file)}:{e.line + first - 1}: not supported by gpusim's Triton "
                               f"front end: {e.what}") from None
    ast.increment_lineno(tree, first - 1)
    g = {k: _shim(v, cache) for k, v in fn.__globals__.items() if not k.startswith("__") or k == "__name__"}
    g.update({LOOP_FN: run_loop, "min": _min, "max": _max, "__builtins__": builtins})
    ns: dict = {}
    exec(compile(tree, file, "exec"), g, ns)   # the user's own kernel code (see SECURITY.md)
    cache[fn] = ns[fn.__name__]
    return cache[fn]


def _resite(e: BaseException) -> TritonTraceError:
    """One line naming the kernel's file and line, whatever raised (the DSL names its caller)."""
    msg = str(e)
    m = re.match(r"^\S+\.py:\d+: ", msg)
    if m:
        msg = msg[m.end():]
    what = msg if isinstance(e, TraceError) else f"{type(e).__name__}: {msg}"
    return TritonTraceError(f"{kernel_site(e.__traceback__)}: {what}")


def trace(fn, name: str, tensors: dict, scalars: dict, grid: tuple, num_warps: int, num_stages: int):
    """(Program, loaded tensor names, stored tensor names) of ``fn`` launched on ``grid``.

    ``tensors``: pointer parameter -> ir.TensorArg; ``scalars``: every other parameter -> its value
    (ints and bools as given, floats become fp32 scalars as Triton types them, constexprs as given)."""
    pyfn = python_function(fn)
    sig = inspect.signature(pyfn)
    constexprs = {n for n, p in sig.parameters.items() if "constexpr" in str(p.annotation)}
    cache: dict = {}
    kfn = traced_function(pyfn, cache)
    ctx = Ctx(tensors, grid, num_stages)

    def body(*_):
        args = {}
        for n in sig.parameters:
            if n in tensors:
                args[n] = Ptr(tensors[n], 0)
            elif n in scalars:
                v = scalars[n]
                args[n] = scalar_tile(v, "fp32") if isinstance(v, float) and n not in constexprs else v
            elif sig.parameters[n].default is not inspect.Parameter.empty:
                args[n] = getattr(sig.parameters[n].default, "value", sig.parameters[n].default)
            else:
                raise TritonTraceError(f"{name}: no value for parameter {n!r}")
        kfn(**args)

    try:
        with ctx:
            prog = dsl.trace(body, name, list(tensors.values()), num_warps=num_warps)
    except (TraceError, TypeError, ValueError, AttributeError, NameError, IndexError, KeyError, AssertionError,
            ZeroDivisionError, RecursionError) as e:
        raise _resite(e) from None
    return prog, tuple(dict.fromkeys(ctx.loaded)), tuple(dict.fromkeys(ctx.stored))
