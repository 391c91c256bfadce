"""A GPU config with fields changed (a what-if): applied through ``whatif.derived_overrides`` (the
fields that follow from a changed one) and validated by ``GPUConfig``; a refusal is one line naming
where the values came from."""
from __future__ import annotations

from pydantic import ValidationError

from .errors import field_error, short as _short
from .hardware import GPUConfig
from .whatif import derived_overrides


def with_overrides(cfg: GPUConfig, overrides: dict, where: str) -> tuple:
    """(``cfg`` with ``overrides`` applied and validated by ``GPUConfig``, the validated values)."""
    if not overrides:
        return cfg, {}
    try:
        new = GPUConfig.model_validate({**cfg.model_dump(), **derived_overrides(cfg, overrides)})
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        got = f" (got {_short(err['input'])})" if err["loc"] else ""
        if where == "gpu_overrides" and err["loc"] and err["loc"][0] in overrides:
            where = f"gpu_overrides.{err['loc'][0]}"
        raise field_error(where, f"{cfg.name} with {', '.join(f'{k}={v}' for k, v in overrides.items())}: "
                          f"{loc + ': ' if loc else ''}{err['msg']}{got}") from None
    return new, {k: getattr(new, k) for k in overrides}
