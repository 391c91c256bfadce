"""The exceptions of scenario runs, shared by loading, running and the executors."""
from __future__ import annotations


def short(v, n=60) -> str:
    """``repr(v)`` cut to ``n`` characters, for one-line messages."""
    s = repr(v)
    return s if len(s) <= n else s[:n - 3] + "..."


class ScenarioError(ValueError):
    """Bad scenario input: the message is one line naming file, field, value and what is allowed."""


class SaveError(ScenarioError):
    """A result could not be written (disk full, permissions); nothing half-written is left behind."""


class RunError(RuntimeError):
    """The run could not finish (a worker process died, the cluster failed); finished points are saved."""


def field_error(fld: str, msg: str):
    """A validation error of scenario field ``fld`` (a path such as ``sweep.n[1]``) with the
    one-line message ``msg``; raised inside the pydantic model, turned back into one line by
    ``scenario.load_scenario``."""
    from pydantic_core import PydanticCustomError

    return PydanticCustomError("scenario", "{message}", {"message": msg, "field": fld})
