"""The words of a scenario's one-line errors: did-you-mean, a shortened value, what a parameter accepts."""
from __future__ import annotations

import difflib

from ..kernels import KERNELS
from ..errors import short  # noqa: F401  (scenario uses it)


def did_you_mean(word, options):
    close = difflib.get_close_matches(str(word), [str(o) for o in options], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def expected_value(pname: str) -> str:
    """What a parameter accepts, in words (from the first kernel that takes it)."""
    for spec in KERNELS.values():
        p = spec.param(pname)
        if p is None:
            continue
        if p.choices:
            return f"one of {', '.join(map(str, p.choices))}"
        if p.kind is bool:
            return "true or false"
        if p.kind is int:
            return "a positive integer" if p.positive else "an integer"
        return "a string"
    return "a value"


def taking(kernels: list, verb: str) -> str:
    return f"{' and '.join(kernels)} {verb}{('es' if verb == 'do' else 's') if len(kernels) == 1 else ''}"
