"""The one parser of ``--set KEY=VALUE`` scenario overrides. The bounded YAML reader lives in
``gpusim.yamlio`` (below the GPU config loader, which uses it too) and is re-exported here."""
from __future__ import annotations

import yaml

from ..yamlio import (MAX_EXPANDED_NODES, MAX_FILE_BYTES, InputError, loads, read_text_bounded,  # noqa: F401
                      read_yaml)
from .errors import ScenarioError


def storage_path(key: str) -> list:
    """Where a ``--set`` field path lives in the scenario: ``gpu.FIELD`` is a GPU override
    (``gpu_overrides.FIELD``) and ``sweep.gpu.FIELD`` is one sweep key (``gpu.FIELD``)."""
    parts = key.strip().split(".")
    if parts[0] == "gpu" and len(parts) > 1:
        return ["gpu_overrides", ".".join(parts[1:])]
    if parts[0] == "sweep" and len(parts) > 2 and parts[1] == "gpu":
        return ["sweep", ".".join(parts[1:])]
    return parts


def parse_assignment(a: str, src: str = "--set") -> tuple:
    """``KEY=VALUE`` -> (field path as a list, value parsed as YAML). The one parser of ``--set``."""
    if "=" not in a:
        raise ScenarioError(f"{src} {a!r}: expected KEY=VALUE with a dotted field path, "
                            f"e.g. params.head_dim=128 or sweep.seq_len=[512,1024]")
    key, raw = a.split("=", 1)
    parts = key.strip().split(".")
    if not all(parts):
        raise ScenarioError(f"{src} {a!r}: empty field path {key.strip()!r}; expected e.g. params.head_dim=128")
    try:
        val = loads(raw)
    except yaml.YAMLError as e:
        raise ScenarioError(f"{src} {a!r}: {key.strip()}: value {raw!r} is not valid YAML "
                            f"({getattr(e, 'problem', None) or e}); quote strings, write lists as [a,b]") from None
    except InputError as e:
        raise ScenarioError(f"{src} {a!r}: {key.strip()}: {e}") from None
    except RecursionError:
        raise ScenarioError(f"{src} {_short(a)}: {key.strip()}: nested too deeply; a value is a number, "
                            f"a string or a short list or mapping") from None
    return storage_path(key), val


def _short(v, n=60) -> str:
    s = repr(v)
    return s if len(s) <= n else s[:n - 3] + "..."


def apply_set(data: dict, assignments: list, src: str = "--set") -> dict:
    """Apply ``key=value`` overrides to ``data``, copying only the mappings on each changed path
    (``data`` itself is not modified; nothing else is copied, so shared aliases stay shared)."""
    data = dict(data)
    for a in assignments or []:
        parts, val = parse_assignment(a, src)
        cur = data
        for depth, part in enumerate(parts[:-1]):
            nxt = cur.get(part)
            if nxt is None:
                nxt = {}
            elif not isinstance(nxt, dict):
                raise ScenarioError(f"{src} {a!r}: {'.'.join(parts[:depth + 1])} is {_short(nxt)}, "
                                    f"not a mapping, so it has no field {parts[depth + 1]!r}")
            else:
                nxt = dict(nxt)
            cur[part] = nxt
            cur = nxt
        cur[parts[-1]] = val
    return data
