"""Reading GPU config files: a GPU by name (configs/NAME.yaml) or path, its YAML read through the
bounded reader, and every failure as one ``ConfigError`` line naming the file and the field; the
checks of what a file may hold beyond a field's type (no true/false for a number, an architecture
the timing model has). The schema is ``hardware.GPUConfig``; ``hardware.load_gpu`` puts the two
together."""
from __future__ import annotations

from pathlib import Path

from pydantic_core import PydanticCustomError

from . import yamlio

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"   # the repository's configs/ (editable install)


class ConfigError(ValueError):
    """A GPU config could not be found or validated (message names file and field)."""


def available_gpus() -> list[str]:
    return sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


def _short(v, n: int = 60) -> str:
    """A bounded repr: never walks more of ``v`` than it prints (safe on YAML alias bombs)."""
    out: list = []
    budget = [n + 1]

    def put(text):
        out.append(text[:budget[0]])
        budget[0] -= len(text)

    def walk(x):
        if budget[0] <= 0:
            return
        if isinstance(x, dict):
            put("{")
            for i, (k, val) in enumerate(x.items()):
                if budget[0] <= 0:
                    break
                put((", " if i else "") + repr(k)[:n] + ": ")
                walk(val)
            put("}")
        elif isinstance(x, (list, tuple)):
            put("[")
            for i, val in enumerate(x):
                if budget[0] <= 0:
                    break
                put(", " if i else "")
                walk(val)
            put("]")
        else:
            put(repr(x)[:n + 1])

    walk(v)
    s = "".join(out)
    return s if len(s) <= n else s[:n - 3] + "..."


def _looks_like_path(name_or_path) -> bool:
    s = str(name_or_path)
    return isinstance(name_or_path, Path) or s.endswith((".yaml", ".yml")) or "/" in s or "\\" in s


def config_path(name_or_path: str | Path) -> Path:
    """The file of a GPU given by name (configs/NAME.yaml) or by path to a YAML file."""
    p = Path(name_or_path)
    if not _looks_like_path(name_or_path):
        p = CONFIG_DIR / f"{name_or_path}.yaml"
        if not p.exists():
            import difflib

            names = available_gpus()
            close = difflib.get_close_matches(str(name_or_path), names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"unknown GPU {str(name_or_path)!r}{hint}; available: {', '.join(names)} or a path to a GPU YAML")
    return p


def read_config(p: Path) -> dict:
    """The mapping of GPU fields in the YAML file ``p``, read through the bounded YAML reader."""
    data = yamlio.read_yaml(p, "a GPU YAML file", ConfigError,
                            " (a GPU is a name from `gpusim gpus` or a path to a GPU YAML)")
    if data is None:
        raise ConfigError(f"{p}: the file is empty; expected a GPU config mapping (see configs/h100.yaml)")
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected a mapping of GPU fields (see configs/h100.yaml), "
                          f"got a {type(data).__name__} (is it a GPU config?)")
    return data


def validation_error(p: Path, e: Exception) -> ConfigError:
    """The one-line ``ConfigError`` for the schema's refusal ``e`` (a pydantic ValidationError) of ``p``."""
    errs = getattr(e, "errors", lambda: [])()
    if not errs:
        return ConfigError(f"{p}: {str(e).splitlines()[0]}")
    err = errs[0]
    loc = ".".join(str(x) for x in err["loc"])
    if err["type"] == "implausible":
        return ConfigError(f"{p}: {err['msg']}")
    if err["type"] == "missing":
        missing = [".".join(str(x) for x in x["loc"]) for x in errs if x["type"] == "missing"]
        more = (f" (also missing: {', '.join(missing[1:4])}{f' and {len(missing) - 4} more' if len(missing) > 4 else ''})"
                if len(missing) > 1 else "")
        return ConfigError(f"{p}: missing field {loc}{more}; every GPU config needs it (see configs/h100.yaml)")
    msg = err["msg"].removeprefix("Value error, ")
    if not loc:
        return ConfigError(f"{p}: {msg}")
    return ConfigError(f"{p}: field {loc}: {msg} (got {_short(err.get('input'))})")


# The architectures whose mechanisms the timing model has (compute capability, major x 10 + minor):
# Ampere and Ada (8.x: mma.sync, cp.async) and Hopper (9.0: wgmma). Another (Blackwell's 10.x with
# tcgen05 and tensor memory, Volta/Turing without cp.async) is refused until it is modeled.
MODELED_ARCHS = {80: "Ampere", 86: "Ampere", 87: "Ampere", 89: "Ada", 90: "Hopper"}
_ARCH_MISSING = {10: "Blackwell (10.x) multiplies through tcgen05 and tensor memory, which the timing model lacks",
                 12: "the tensor cores of Blackwell 12.x are not in the timing model",
                 7: "Volta and Turing (7.x) have no cp.async, which the timing model's staging assumes"}


def arch_problem(cc: int) -> str | None:
    """Why compute capability ``cc`` is one the timing model does not model (naming what is
    missing and what is modeled), or None."""
    if cc in MODELED_ARCHS:
        return None
    missing = _ARCH_MISSING.get(cc // 10, f"compute capability {cc // 10}.{cc % 10} is no architecture the "
                                          f"timing model has")
    return f"not modeled: {missing}; the timing model has 80, 86, 87 (Ampere), 89 (Ada) and 90 (Hopper)"


def _bool_in(v, where: str):
    """(path, value) of the first true/false in ``v`` (a field's raw value, nested tables walked),
    or None."""
    if isinstance(v, bool):
        return where, v
    items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, (list, tuple)) else ()
    for k, x in items:
        found = _bool_in(x, f"{where}.{k}" if isinstance(v, dict) else f"{where}[{k}]")
        if found:
            return found
    return None


def refuse_booleans(model, data):
    """``data`` (the raw input of pydantic ``model``) unless it has true/false in a numeric field
    (pydantic would read it as 1 or 0): a ``PydanticCustomError`` naming the field."""
    for k, v in (data.items() if isinstance(data, dict) else ()):
        f = model.model_fields.get(k)
        kind = repr(f.annotation) if f is not None else "bool"
        if "bool" in kind or not ("int" in kind or "float" in kind):
            continue                     # a flag, a text, or a nested model (which checks its own fields)
        found = _bool_in(v, str(k))
        if found:
            raise PydanticCustomError("implausible", "{where} = {value}: a number goes here, not true/false",
                                      {"where": found[0], "value": str(found[1]).lower()})
    return data
