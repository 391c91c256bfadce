"""The exceptions of scenario runs, shared by loading, running and the executors."""
from __future__ import annotations


class ScenarioError(ValueError):
    """Bad scenario input: the message is one line naming file, field, value and what is allowed."""


class SaveError(ScenarioError):
    """A result could not be written (disk full, permissions); nothing half-written is left behind."""


class RunError(RuntimeError):
    """The run could not finish (a worker process died, the cluster failed); finished points are saved."""
