"""One simulation of a sweep: the ``Point``, its cache key, and ``run_point``.

The key hashes everything that determines a point's numbers: the point itself, the resolved GPU
config (after any ``gpu.<field>`` what-if overrides), the gpusim version, the hash of the
package's source code (``provenance.code_hash``) and the compiler's view the point is timed with
(``compiler.view_name``: ``triton X.Y.Z`` or ``estimate``, resolved from ``$GPUSIM_RESOURCES`` and
what is installed), so a changed model or compiler never serves old numbers.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from .. import provenance
from ..hardware import GPUConfig


@dataclass(frozen=True)
class Point:
    """Everything that determines one result. ``config`` is the resolved GPU (overrides applied),
    carried along so workers (local or remote) need not find the GPU YAML themselves;
    ``config_hash`` is its hash; ``gpu_overrides`` the GPU fields changed from the named config."""

    gpu: str
    kernel: str
    params: dict
    check: object
    fidelity: str
    config: GPUConfig | None = field(default=None, compare=False, repr=False)
    config_hash: str = ""
    gpu_overrides: dict = field(default_factory=dict)
    max_work: float | None = field(default=None, compare=False)   # precheck's limit: refuses, never changes numbers
    kernel_ref: str = ""          # what simulate() is given: a kernel file's absolute path:name ("" = kernel)
    kernel_hash: str = ""         # hash of a kernel file's text ("" for built-ins, covered by the code hash)
    calibration: str = "on"       # on | off: the learned correction (its data file is in the code hash)

    def key(self) -> str:
        from .. import __version__
        from ..compiler import view_name

        blob = json.dumps({"point": point_dict(self), "config": self.config_hash, "version": __version__,
                           **({"kernel_source": self.kernel_hash} if self.kernel_hash else {}),
                           "code": provenance.code_hash(), "resources": view_name(self.config)},
                          sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:20]


def point_dict(pt: Point) -> dict:
    """The point as saved next to its result (and compared when a saved result is reused)."""
    d = {"gpu": pt.gpu, "kernel": pt.kernel, "params": pt.params, "check": pt.check, "fidelity": pt.fidelity}
    if pt.gpu_overrides:
        d["gpu_overrides"] = pt.gpu_overrides
    if pt.calibration != "on":
        d["calibration"] = pt.calibration
    return d


def point_text(rec: dict) -> str:
    """A point file's text: ``rec`` (the point, its result rows, provenance) with ``checksum``, the
    SHA-256 of ``rec``'s canonical JSON (sorted keys, no checksum), so a file edited by hand or
    damaged on disk is noticed (``check_record``) and recomputed."""
    rec = {k: v for k, v in rec.items() if k != "checksum"}
    rec = json.loads(json.dumps(rec, sort_keys=True, default=str))
    return json.dumps({**rec, "checksum": _digest(rec)}, sort_keys=True)


def _digest(rec: dict) -> str:
    return hashlib.sha256(json.dumps(rec, sort_keys=True, default=str).encode()).hexdigest()


def check_record(text: str) -> tuple:
    """(the record, None) of a point file's text whose checksum holds, else (None, why not) in a
    few words: it cannot be parsed, has no checksum (written by a gpusim before checksums), or its
    checksum does not match its content."""
    try:
        d = json.loads(text)
    except (ValueError, RecursionError):
        return None, "point file cannot be parsed"
    if not isinstance(d, dict):
        return None, "point file cannot be parsed (not a JSON object)"
    want = d.pop("checksum", None)
    if want is None:
        return None, "point file has no checksum (written by an older gpusim)"
    if want != _digest(d):
        return None, "point file checksum mismatch"
    return d, None


def _calibration(point: Point) -> str:
    """A what-if point (GPU fields overridden, the sweep's unchanged value included) takes the
    transferred calibration, so one sweep's points share one factor (gpusim.calibration)."""
    return "transferred" if point.calibration == "on" and point.gpu_overrides else point.calibration


def run_point(point: Point, timeline: bool = False):
    """Simulate one point; never raises: failures become status=error rows."""
    from ..api import simulate

    try:
        r = simulate(point.kernel_ref or point.kernel, point.config or point.gpu, check=point.check, fidelity=point.fidelity,
                     timeline=timeline, max_work=point.max_work, calibration=_calibration(point), **point.params)
    except Exception as e:  # a failing point is recorded and the sweep goes on
        msg = (f"{type(e).__name__}: {e}".splitlines() or [type(e).__name__])[0]
        return {"status": "error", "reason": msg}, [], None
    row = r.row(list(point.params))
    kernels = [k.row(0) for k in r.kernels]
    return row, kernels, (r if timeline else None)
