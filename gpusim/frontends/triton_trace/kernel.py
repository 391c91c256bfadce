"""``triton_kernel``: a ``@triton.jit`` function as a gpusim ``Kernel``.

Its parameters are the kernel's arguments plus ``grid``, ``num_warps`` and ``num_stages``
(``args.py`` says what a value may be). Building traces the kernel for those values
(``trace.py``) into one launch; the exact check's reference is the same kernel under Triton's
interpreter (``reference.py``), and the compiled view compiles the kernel's own source
(``compiled.py``)."""
from __future__ import annotations

import dataclasses
import functools
import inspect

from ...dsl import ir
from ...kernels.spec import Kernel, KernelParamError, Param
from .args import ArgParam, Resolver, TensorSpec, grid_of
from .compiled import UserSource
from .trace import python_function, trace

LAUNCH = ("grid", "num_warps", "num_stages")


def triton_kernel(fn, grid=None, args: dict | None = None, num_warps: int = 4, num_stages: int = 3,
                  name: str | None = None, help: str = "") -> Kernel:   # noqa: A002
    """A gpusim Kernel that traces ``fn`` (a ``@triton.jit`` function, also under autotune) for the
    launch its parameters describe. ``args`` maps kernel arguments (and any extra size names) to
    defaults: numbers, tensors ``"fp16[M, N]"`` or expressions ``"cdiv(N, BLOCK)"``; ``grid`` is
    an expression or tuple of them. Parameters left without a value must be given when simulating."""
    pyfn = python_function(fn)
    sig = inspect.signature(pyfn)
    args = dict(args or {})
    params = []
    for n, p in sig.parameters.items():
        default = args.pop(n, None)
        if default is None and p.default is not inspect.Parameter.empty:
            default = getattr(p.default, "value", p.default)
        if default is None and n in ("num_warps", "num_stages"):   # a constexpr that is also the launch option
            default = num_warps if n == "num_warps" else num_stages
        params.append(ArgParam(n, default, f"kernel argument {n}"))
    for n, v in args.items():
        if n not in LAUNCH:
            params.append(ArgParam(n, v, "size used by the other parameters"))
    names = {p.name for p in params}
    if "grid" not in names:
        params.append(ArgParam("grid", grid if grid is not None else args.get("grid"), "launch grid (1 to 3 sizes)"))
    if "num_warps" not in names:
        params.append(Param("num_warps", int, int(args.get("num_warps", num_warps)), "warps per program",
                            (1, 2, 4, 8, 16, 32)))
    if "num_stages" not in names:
        params.append(Param("num_stages", int, int(args.get("num_stages", num_stages)),
                            "software-pipelining depth of loops", (1, 2, 3, 4, 5, 6, 7, 8)))
    kname = name or pyfn.__name__
    doc = (pyfn.__doc__ or "").strip().splitlines()
    return Kernel(kname, help or (doc[0] if doc else f"Triton kernel {pyfn.__name__}"), tuple(params),
                  functools.partial(_build, fn, kname), functools.partial(_reference, fn, kname),
                  f"{pyfn.__module__}:{pyfn.__name__}")


@dataclasses.dataclass(frozen=True)
class LaunchSpec:
    tensors: dict        # name -> TensorSpec
    scalars: dict        # name -> value (every other kernel argument)
    grid: tuple
    num_warps: int
    num_stages: int


def launch_spec(fn, p: dict) -> LaunchSpec:
    pyfn = python_function(fn)
    r = Resolver(p)
    tensors, scalars = {}, {}
    for n in inspect.signature(pyfn).parameters:
        v = r.value(n)
        (tensors if isinstance(v, TensorSpec) else scalars)[n] = v
    for n in LAUNCH[1:]:
        v = r.value(n)
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise KernelParamError(n, f"{n} must be a positive integer, got {v!r}")
    return LaunchSpec(tensors, scalars, grid_of(r.value("grid")), r.value("num_warps"), r.value("num_stages"))


_BUILT: dict = {}


def _build(fn, name, p: dict) -> ir.Workload:
    key = (id(fn), name, tuple(sorted((k, repr(v)) for k, v in p.items())))
    if key not in _BUILT:
        s = launch_spec(fn, p)
        targs = {n: ir.TensorArg(n, t.shape, t.dtype) for n, t in s.tensors.items()}
        prog, loaded, stored = trace(fn, name, targs, s.scalars, s.grid, s.num_warps, s.num_stages)
        hook = UserSource(fn, {n: tuple(t) for n, t in s.tensors.items()}, dict(s.scalars), s.num_warps, s.num_stages)
        prog = dataclasses.replace(prog, meta={**prog.meta, "compile": hook, "triton_source": True})
        if not stored:
            raise KernelParamError("kernel", f"{name}: the kernel stores to no tensor argument")
        inputs = tuple(n for n in targs if n in loaded or n not in stored)
        launch = ir.Launch(name, prog, s.grid, {n: n for n in targs})
        _BUILT[key] = (fn, ir.Workload(name, targs, inputs, tuple(stored), (launch,), dict(p)))
    return _BUILT[key][1]


def _reference(fn, name, inputs: dict, p: dict) -> dict:
    from .reference import run_interpreter

    s = launch_spec(fn, p)
    wl = _build(fn, name, p)
    out = run_interpreter(fn, {n: tuple(t) for n, t in s.tensors.items()}, s.scalars, s.grid, inputs)
    return {n: out[n] for n in wl.outputs}
