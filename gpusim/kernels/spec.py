"""Kernels as first-class objects: typed parameters, a workload builder and a float64 reference.

A ``Kernel`` bundles everything gpusim needs to run and check a kernel written in the tile DSL:

* ``params``: typed ``Param``s (type, default, allowed values, help); ``Kernel.resolve`` fills
  defaults and rejects unknown names and bad values with a one-line ``KernelParamError``;
* ``builder``: resolved params -> ``ir.Workload`` (HBM tensors and launches);
* ``reference``: ``(inputs, params) -> outputs``, computed in float64 without the IR. The
  workload that ``Kernel.build`` returns carries it (``Workload.reference``), so the exact check
  never looks a reference up by name;
* ``inputs`` (optional): ``(workload, seed) -> {input name: array}``, for kernels whose inputs are
  not independent random normals (e.g. a backward pass fed the forward's O and logsumexp). The
  workload carries it too (``Workload.make_inputs``) and ``numpy_exec.random_inputs`` uses it, so
  the exact check, the Triton backends and the GPU harness all run on the same inputs.

User kernels are declared with the ``@kernel(...)`` decorator in any Python file and named as
``path/to/file.py:name`` or ``package.module:name``; built-ins are registered in ``KERNELS`` with
``register_kernel``. ``resolve_kernel`` turns any of these names (or a Kernel) into a Kernel.
"""
from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
import importlib
import importlib.util
import numbers
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .time_limit import TimeLimitError, time_limit

DTYPES = ("fp16", "bf16", "fp32")
FP8_DTYPES = ("fp8e4m3", "fp8e5m2")     # storage dtypes of the kernels that take fp8 (``common``)
PARAM_KINDS = (int, float, bool, str)


class KernelParamError(ValueError):
    """A kernel, or one of its parameters, is unknown or out of range; ``field`` names it."""

    def __init__(self, field, msg):
        super().__init__(msg)
        self.field = field


@dataclass(frozen=True)
class Param:
    """One typed kernel parameter. ``kind`` is int, float, bool or str; ``choices`` (if any) are
    the allowed values; ``positive`` requires numbers > 0."""

    name: str
    kind: type
    default: object
    help: str
    choices: tuple = ()
    positive: bool = True

    def __post_init__(self):
        if self.kind not in PARAM_KINDS:
            raise TypeError(f"Param {self.name!r}: kind must be one of int, float, bool, str, got {self.kind!r}")
        object.__setattr__(self, "choices", tuple(self.choices))

    def allowed(self) -> str:
        """What the parameter accepts, in words."""
        if self.choices:
            return f"one of {', '.join(map(str, self.choices))}"
        if self.kind is bool:
            return "true or false"
        if self.kind in (int, float):
            word = "integer" if self.kind is int else "number"
            return f"a positive {word}" if self.positive and self.kind is int else f"a {word}"
        return "a string"

    def convert(self, val):
        """``val`` as this parameter's type (numpy scalars accepted), or KernelParamError."""
        name = self.name
        if self.kind is bool:
            if not isinstance(val, (bool, _np_bool())):
                raise KernelParamError(name, f"{name} must be true or false, got {val!r}")
            val = bool(val)
        elif self.kind is int:
            if isinstance(val, (bool, _np_bool())) or not isinstance(val, numbers.Integral):
                raise KernelParamError(name, f"{name} must be an integer, got {val!r}")
            val = int(val)
            if self.positive and val <= 0:
                raise KernelParamError(name, f"{name} must be a positive integer, got {val}")
        elif self.kind is float:
            if isinstance(val, (bool, _np_bool())) or not isinstance(val, numbers.Real):
                raise KernelParamError(name, f"{name} must be a number, got {val!r}")
            val = float(val)
            if self.positive and not val > 0:
                raise KernelParamError(name, f"{name} must be a positive number, got {val}")
        elif not isinstance(val, str):
            raise KernelParamError(name, f"{name} must be a string, got {val!r}")
        if self.choices and val not in self.choices:
            raise KernelParamError(name, f"{name} must be one of {', '.join(map(str, self.choices))}, got {val!r}")
        return val


def _np_bool():
    import numpy as np

    return np.bool_


@dataclass(frozen=True, eq=False)
class Kernel:
    """A kernel: name, help, typed params, workload builder and float64 reference."""

    name: str
    help: str
    params: tuple
    builder: Callable
    reference: Callable | None = None
    source: str = ""
    inputs: Callable | None = None

    def param(self, name: str) -> Param | None:
        for p in self.params:
            if p.name == name:
                return p
        return None

    @property
    def param_names(self) -> tuple:
        return tuple(p.name for p in self.params)

    def resolve(self, given: dict | None = None) -> dict:
        """Defaults filled in and every value checked; an unknown name is an error naming the
        kernel and the parameters it takes (a name given as None counts as not given)."""
        given = dict(given or {})
        for name, val in given.items():
            if self.param(name) is None and val is not None:
                close = difflib.get_close_matches(str(name), list(self.param_names), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise KernelParamError(name, f"{self.name} does not take parameter {name!r}{hint}; it takes "
                                             f"{', '.join(self.param_names) or 'no parameters'}")
        out = {}
        for prm in self.params:
            val = given.get(prm.name)
            out[prm.name] = prm.convert(prm.default if val is None else val)
        return out

    def build(self, params: dict | None = None, **kw):
        """The ``ir.Workload`` for ``params`` (resolved here), carrying this kernel's reference."""
        from ..dsl import ir

        p = self.resolve({**(params or {}), **kw})
        with time_limit(f"kernel {self.name}: its builder"):
            wl = self.builder(dict(p))
        if not isinstance(wl, ir.Workload):
            raise TypeError(f"kernel {self.name}: its builder returned {type(wl).__name__}, not an ir.Workload")
        ref = functools.partial(_call_reference, self.reference, p) if self.reference is not None else None
        wl = dataclasses.replace(wl, params=p, reference=ref)
        if self.inputs is not None:
            wl = dataclasses.replace(wl, make_inputs=functools.partial(_call_inputs, self.inputs, wl))
        return wl

    def describe(self) -> str:
        """Multi-line listing: name, help, and one line per parameter (used by ``gpusim kernels``)."""
        lines = [f"{self.name}: {self.help}"]
        for p in self.params:
            allowed = f" [{', '.join(map(str, p.choices))}]" if p.choices else ""
            lines.append(f"    {p.name:<11} {p.kind.__name__:<5} default {str(p.default):<9} {p.help}{allowed}")
        return "\n".join(lines)

    def __repr__(self):
        return f"Kernel({self.name!r}, params=[{', '.join(self.param_names)}])"


def _call_reference(reference, params, inputs):
    import numpy as np

    x = {k: np.asarray(v, dtype=np.float64) for k, v in inputs.items()}
    return reference(x, dict(params))


def _call_inputs(inputs_fn, workload, seed):
    """The kernel's generated inputs, checked (every input, its shape) and in its storage dtype."""
    import numpy as np

    from ..backends.numpy_exec import NP_DTYPE, to_dtype

    out = inputs_fn(workload, seed)
    missing = [n for n in workload.inputs if n not in out]
    if missing:
        raise ValueError(f"the input generator of {workload.name!r} returned no {', '.join(missing)} "
                         f"(it must return every input: {', '.join(workload.inputs)})")
    res = {}
    for n in workload.inputs:
        t = workload.tensors[n]
        a = np.asarray(out[n])
        if a.shape != tuple(t.shape):
            raise ValueError(f"the input generator of {workload.name!r} returned {n} of shape {a.shape}, "
                             f"the input tensor is {tuple(t.shape)}")
        res[n] = a if a.dtype == NP_DTYPE[t.dtype] and t.dtype != "bf16" else to_dtype(a, t.dtype)
    return res


def kernel(*, name: str | None = None, help: str = "", params=(), reference: Callable | None = None,
           inputs: Callable | None = None):
    """Decorator: turn ``build(params: dict) -> ir.Workload`` into a ``Kernel``.

    ``reference(inputs, params) -> outputs`` gets float64 arrays of the workload's inputs and
    returns float64 arrays of its outputs. ``inputs(workload, seed) -> {name: array}``, if given,
    generates the inputs of a check or a measurement (default: independent random normals rounded
    to the storage dtype); it is called with the built workload, whose ``params`` are resolved.
    The kernel's name defaults to the function's name and its help to the first line of its
    docstring."""
    for p in params:
        if not isinstance(p, Param):
            raise TypeError(f"kernel params must be Param(...) objects, got {p!r}")
    if inputs is not None and not callable(inputs):
        raise TypeError(f"kernel inputs must be a function (workload, seed) -> dict, got {inputs!r}")

    def wrap(fn) -> Kernel:
        doc = (fn.__doc__ or "").strip().splitlines()
        return Kernel(name or fn.__name__, help or (doc[0] if doc else ""), tuple(params), fn, reference,
                      f"{fn.__module__}:{fn.__name__}", inputs)

    return wrap


# --------------------------------------------------------------------------- the built-in registry
KERNELS: dict = {}


def register_kernel(k: Kernel) -> Kernel:
    """Add a built-in kernel to ``KERNELS`` (usable as a decorator above ``@kernel``)."""
    if not isinstance(k, Kernel):
        raise TypeError(f"register_kernel takes a Kernel, got {type(k).__name__}")
    if k.name in KERNELS and KERNELS[k.name] is not k:
        raise ValueError(f"a built-in kernel named {k.name!r} is already registered")
    KERNELS[k.name] = k
    return k


def _unknown(name: str) -> KernelParamError:
    close = difflib.get_close_matches(name, list(KERNELS), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return KernelParamError("kernel", f"unknown kernel {name!r}{hint}; available: {', '.join(KERNELS)}, "
                                      f"or a user kernel as path/to/file.py:name or package.module:name")


def resolve_kernel(name, base_dir=None) -> Kernel:
    """A Kernel from a Kernel, a built-in name, ``path/to/file.py:name`` (relative to ``base_dir``,
    default the working directory) or ``package.module:name``."""
    if isinstance(name, Kernel):
        return name
    if not isinstance(name, str) or not name:
        raise KernelParamError("kernel", f"a kernel is a name or a gpusim Kernel, got {name!r}")
    if name in KERNELS:
        return KERNELS[name]
    if ":" not in name:
        raise _unknown(name)
    where, _, attr = name.rpartition(":")
    if not attr.isidentifier():
        raise KernelParamError("kernel", f"{name!r}: {attr!r} after ':' must be the Python name of a Kernel")
    if where.endswith(".py") or "/" in where or os.sep in where:
        module = load_kernel_file(where, base_dir)
    else:
        if not all(part.isidentifier() for part in where.split(".")):
            raise KernelParamError("kernel", f"{name!r}: {where!r} is not a module name (package.module) "
                                             f"nor a path to a .py file")
        if where.split(".")[0] in getattr(sys, "stdlib_module_names", ()):
            raise KernelParamError("kernel", f"{name!r}: {where!r} is a Python standard-library module, not a "
                                             f"kernel module; give path/to/file.py:name or your package.module:name")
        try:
            module = importlib.import_module(where)
        except ImportError as e:
            raise KernelParamError("kernel", f"{name!r}: cannot import module {where!r} ({e})") from None
    obj = getattr(module, attr, None)
    if obj is None:
        found = [k.name for k in kernels_in_module(module)]
        raise KernelParamError("kernel", f"{name!r}: {where} has no {attr!r}; its kernels: "
                                         f"{', '.join(found) or 'none (decorate a builder with @kernel)'}")
    for adapt in KERNEL_ADAPTERS:   # e.g. a @triton.jit function (gpusim.frontends registers it)
        obj = obj if isinstance(obj, Kernel) else adapt(obj) or obj
    if not isinstance(obj, Kernel):
        raise KernelParamError("kernel", f"{name!r}: {attr} is a {type(obj).__name__}, not a gpusim Kernel "
                                         f"(declare it with @gpusim.kernels.kernel(...))")
    return obj


KERNEL_ADAPTERS: list = []      # obj -> Kernel or None, for kernels written for other tools (gpusim.frontends)
_FILE_MODULES: dict = {}
MAX_KERNEL_FILE_BYTES = 1 << 20


def load_kernel_file(path, base_dir=None):
    """Import a kernel file once per (path, modification time); returns the module."""
    p = Path(path)
    if not p.is_absolute():
        p = Path(base_dir or os.getcwd()) / p
    p = p.resolve()
    if not p.is_file():
        raise KernelParamError("kernel", f"kernel file {str(path)!r} not found (looked for {p})")
    if p.suffix != ".py":
        raise KernelParamError("kernel", f"kernel file {str(path)!r}: a kernel file is Python source ending in .py")
    if p.stat().st_size > MAX_KERNEL_FILE_BYTES:
        raise KernelParamError("kernel", f"kernel file {str(path)!r}: {p.stat().st_size:,} bytes; a kernel file "
                                         f"is at most {MAX_KERNEL_FILE_BYTES:,} bytes")
    key = (str(p), p.stat().st_mtime_ns)
    if key in _FILE_MODULES:
        return _FILE_MODULES[key]
    modname = f"gpusim_user_kernels.{p.stem}_{hashlib.sha1(str(p).encode()).hexdigest()[:8]}"
    spec = importlib.util.spec_from_file_location(modname, p)
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module       # lets pickle and dataclasses find the module
    sys.path.insert(0, str(p.parent))   # modules beside the kernel file import as from a script
    try:
        with time_limit(f"importing the kernel file {path}"):
            spec.loader.exec_module(module)
    except (Exception, SystemExit) as e:
        sys.modules.pop(modname, None)
        if isinstance(e, TimeLimitError):
            raise KernelParamError("kernel", str(e)) from None
        line = getattr(e, "lineno", None)
        if line is None:
            tb = e.__traceback__
            while tb is not None:
                if tb.tb_frame.f_code.co_filename == str(p):
                    line = tb.tb_lineno
                tb = tb.tb_next
        at = f"{path}:{line}" if line else str(path)
        raise KernelParamError("kernel", f"{at}: error while importing the kernel file: "
                                         f"{type(e).__name__}: {e}") from None
    finally:
        if str(p.parent) in sys.path:
            sys.path.remove(str(p.parent))
    _FILE_MODULES[key] = module
    return module


def kernels_in_module(module) -> list:
    """The Kernel objects a module defines at top level, in definition order."""
    return [v for v in vars(module).values() if isinstance(v, Kernel)]


def next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def common(dtypes: tuple = DTYPES, dtype_help: str = "storage dtype of the HBM tensors") -> tuple:
    """The ``dtype`` and ``num_warps`` parameters every built-in takes, ``dtype`` one of ``dtypes``."""
    return (Param("dtype", str, "fp16", dtype_help, dtypes),
            Param("num_warps", int, 4, "warps per CTA (Triton's num_warps)", (1, 2, 4, 8, 16, 32)))


COMMON = common()
POW2 = tuple(2 ** i for i in range(4, 9))      # tile sizes 16..256
