"""The exceptions of scenario runs; they live in ``gpusim.errors`` (below every layer that raises them)."""
from ..errors import RunError, SaveError, ScenarioError, field_error  # noqa: F401  (re-exported)
