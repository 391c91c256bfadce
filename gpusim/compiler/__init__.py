"""The compiler's view: what the compiler decides below the tile (registers, spills, the SASS of
each loop), from a named source -- Triton's compiler at a stated version, or the analytic estimate
(``view.py``; the estimate's layouts and liveness in ``layouts.py`` and ``registers.py``)."""
from .view import (ESTIMATE, RESOURCE_MODES, RESOURCES_ENV, CompilerView, compiled, resources_mode,  # noqa: F401
                   view_name, view_of)
