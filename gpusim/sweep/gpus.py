"""GPUs named in a scenario: finding the config (a path relative to the scenario file, or a
name from configs/) and applying ``gpu.<field>`` what-if overrides, validated by ``GPUConfig``."""
from __future__ import annotations

import difflib
import re
from pathlib import Path

from ..hardware import ConfigError, GPUConfig, load_gpu
from ..overrides import with_overrides  # noqa: F401  (re-exported)
from ..errors import short as _short

# GPU fields that describe rather than parametrize the hardware; they cannot be overridden.
NOT_OVERRIDABLE = ("name", "description", "sources", "measurements", "provenance")
GPU_FIELDS = tuple(f for f in GPUConfig.model_fields if f not in NOT_OVERRIDABLE)


def _did_you_mean(word, options):
    close = difflib.get_close_matches(str(word), [str(o) for o in options], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _load_gpu(g: str) -> GPUConfig:
    """``load_gpu`` with a did-you-mean for unknown fields in a GPU YAML given by path."""
    try:
        return load_gpu(g)
    except ConfigError as e:
        m = re.search(r"field (\w+): Extra inputs are not permitted", str(e))
        if not m:
            raise
        fields = list(GPUConfig.model_fields)
        raise ConfigError(f"{g}: unknown field {m.group(1)!r}{_did_you_mean(m.group(1), fields)}; "
                          f"GPU fields: {', '.join(fields)}") from None


def resolve_gpu(g: str, base_dir: Path) -> GPUConfig:
    """A GPU named in a scenario: a path (has a / or ends in .yaml) relative to the scenario's
    folder, then in the named configs (configs/), never silently from the working directory;
    otherwise a config name from configs/."""
    if not ("/" in g or "\\" in g or g.endswith((".yaml", ".yml"))):
        return _load_gpu(g)
    p = Path(g).expanduser()
    from ..hardware import CONFIG_DIR

    tried = [p] if p.is_absolute() else list(dict.fromkeys([Path(base_dir) / p, CONFIG_DIR / p]))
    for c in tried:
        if c.is_file():
            if c.suffix not in (".yaml", ".yml"):
                raise ConfigError(f"{c}: a GPU config file must end in .yaml or .yml")
            return _load_gpu(str(c))
        if c.is_dir():
            raise ConfigError(f"{c}: is a directory, expected a GPU YAML file")
    raise ConfigError(f"{g}: file not found (looked for {' and '.join(str(c) for c in tried)})")
