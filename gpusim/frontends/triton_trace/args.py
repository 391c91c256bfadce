"""The launch of a Triton kernel as typed parameters: every kernel argument, ``grid``,
``num_warps`` and ``num_stages`` are parameters of the gpusim Kernel, given in a scenario's
``params`` or to ``gpusim.triton_kernel(..., args=...)``.

A value is a number, a bool, or a string: a tensor ``"fp16[M, N]"`` (dtype and shape, contiguous;
dtypes fp16, bf16, fp32, int32), or an expression over the other parameters (``"N"``,
``"cdiv(M, 64) * cdiv(N, 64)"``, ``"next_pow2(n_cols)"``; + - * // % and cdiv, next_pow2, min,
max); ``grid`` is an expression or a tuple of them (``"(cdiv(N, BLOCK), 1)"``). A bare word that
names no parameter is a string constant (a ``tl.constexpr`` string such as an activation name)."""
from __future__ import annotations

import ast
import re

from ...kernels.spec import KernelParamError, Param

TENSOR = re.compile(r"^\s*(fp16|bf16|fp32|int32)\s*\[(.*)\]\s*$")
_FUNCS = {"cdiv": lambda a, b: -(-a // b), "next_pow2": lambda n: 1 << max(0, (int(n) - 1).bit_length()),
          "min": min, "max": max}
_FUNCS["next_power_of_2"] = _FUNCS["next_pow2"]


class ArgParam(Param):
    """A launch parameter: a number, bool, tensor spec or expression (checked when resolved)."""

    def __init__(self, name, default, help_=""):
        super().__init__(name, str, default, help_ or "a number, a tensor (fp16[M, N]) or an expression")

    def allowed(self) -> str:
        return "a number, true/false, a tensor such as fp16[M, N], or an expression over the other parameters"

    def convert(self, val):
        if val is None:
            return None         # not given: building the kernel says so (a scenario checks one value at a time)
        if not isinstance(val, (bool, int, float, str)):
            raise KernelParamError(self.name, f"{self.name} must be {self.allowed()}, got {val!r}")
        return val


def _eval(node, env, name):
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise KeyError(node.id)
        return env[node.id]
    if isinstance(node, ast.Tuple):
        return tuple(_eval(e, env, name) for e in node.elts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, env, name)
    if isinstance(node, ast.BinOp):
        ops = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
               ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b, ast.Div: lambda a, b: a / b,
               ast.Pow: lambda a, b: a ** b}
        if type(node.op) in ops:
            return ops[type(node.op)](_eval(node.left, env, name), _eval(node.right, env, name))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS and not node.keywords:
        return _FUNCS[node.func.id](*(_eval(a, env, name) for a in node.args))
    raise KernelParamError(name, f"{name}: {ast.unparse(node)!r} is not allowed in an expression (numbers, other "
                                 f"parameters, + - * // %, cdiv, next_pow2, min, max)")


class Resolver:
    """Values of all launch parameters, expressions evaluated in dependency order."""

    def __init__(self, given: dict):
        self.given, self.done, self.busy = dict(given), {}, set()

    def value(self, name):
        if name in self.done:
            return self.done[name]
        if name in self.busy:
            raise KernelParamError(name, f"{name}: its expression refers back to itself")
        self.busy.add(name)
        raw = self.given[name]
        self.done[name] = self._resolve(name, raw)
        self.busy.discard(name)
        return self.done[name]

    def _expr(self, name, text):
        try:
            tree = ast.parse(text.strip(), mode="eval").body
        except SyntaxError:
            raise KernelParamError(name, f"{name}: {text!r} is not an expression") from None
        env = _Lazy(self)
        try:
            return _eval(tree, env, name)
        except KeyError as e:
            if isinstance(tree, ast.Name):
                return text.strip()
            raise KernelParamError(name, f"{name}: {text!r} names {e.args[0]!r}, which is no parameter; "
                                         f"parameters: {', '.join(self.given)}") from None
        except (ZeroDivisionError, TypeError) as e:
            raise KernelParamError(name, f"{name}: {text!r}: {e}") from None

    def _resolve(self, name, raw):
        if raw is None:
            raise KernelParamError(name, f"{name} is not given; give a number, true/false, a tensor such as "
                                         f"fp16[M, N], or an expression over the other parameters")
        if not isinstance(raw, str):
            return raw
        m = TENSOR.match(raw)
        if m:
            dims = self._expr(name, f"({m.group(2)},)") if m.group(2).strip() else ()
            if not all(isinstance(d, int) and d > 0 for d in dims):
                raise KernelParamError(name, f"{name}: tensor {raw!r} needs positive integer sizes, got {dims}")
            return TensorSpec(m.group(1), tuple(dims))
        if raw.strip() == "":
            return ""
        return self._expr(name, raw)


class _Lazy(dict):
    def __init__(self, r):
        super().__init__()
        self.r = r

    def __contains__(self, k):
        return k in self.r.given

    def __getitem__(self, k):
        v = self.r.value(k)
        if isinstance(v, TensorSpec):
            raise KernelParamError(k, f"{k} is a tensor, not a number")
        return v


class TensorSpec(tuple):
    """(dtype, shape)."""

    def __new__(cls, dtype, shape):
        return super().__new__(cls, (dtype, tuple(shape)))

    dtype = property(lambda s: s[0])
    shape = property(lambda s: s[1])


def grid_of(v, name="grid") -> tuple:
    g = v if isinstance(v, tuple) else (v,)
    if not 1 <= len(g) <= 3 or not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in g):
        raise KernelParamError(name, f"{name} must be 1 to 3 positive integers, got {v!r}")
    return tuple(g)
