"""A scenario's sweep as axes of a product, and its expansion into points: a plain key is an axis of
one field; a ``zip`` group is one axis whose fields take their i-th values together."""
from __future__ import annotations

import itertools
import json
import math

from ..bounds import cross_problem
from ..errors import short
from ..kernels import KernelParamError
from .errors import field_error
from .gpus import with_overrides
from .kernel_files import kernel_ref, kernel_source_hash
from .point import Point
from .progress import Progress

# Expanding costs tens of microseconds a point: from this many points on (seconds) it shows progress.
SHOW_EXPANSION = 50_000


ZIP_KEY = "zip"     # the sweep key whose fields take their values together


def zip_groups(z) -> list | None:
    """[(path, {field: values})] of a sweep's ``zip`` entry: one mapping, or a list of them;
    None when it is neither."""
    if z is None:
        return []
    if isinstance(z, dict):
        return [(f"sweep.{ZIP_KEY}", z)]
    if isinstance(z, list) and z and all(isinstance(g, dict) for g in z):
        return [(f"sweep.{ZIP_KEY}[{i}]", g) for i, g in enumerate(z)]
    return None


def sweep_axes(sweep: dict) -> list:
    """The axes of the product, in scenario order: (field names, value rows). A plain key is an
    axis of one field; a zip group one axis of its fields, row i holding each one's i-th value."""
    axes = []
    for k, v in (sweep or {}).items():
        if k != ZIP_KEY:
            axes.append(([k], [(x,) for x in v]))
            continue
        for _, g in zip_groups(v) or []:
            names = list(g)
            axes.append((names, list(zip(*(g[n] for n in names)))))
    return axes


def flat_sweep(sweep: dict) -> dict:
    """Every swept field and its values, zipped ones included, in scenario order."""
    return {n: [row[i] for row in rows] for names, rows in sweep_axes(sweep) for i, n in enumerate(names)}


def sweep_paths(sweep: dict) -> dict:
    """Each swept field's path in the scenario (``sweep.seq_len``, ``sweep.zip.gpu.l2_bytes``)."""
    out = {k: f"sweep.{k}" for k in (sweep or {}) if k != ZIP_KEY}
    for path, g in zip_groups((sweep or {}).get(ZIP_KEY)) or []:
        out.update({k: f"{path}.{k}" for k in g})
    return out


def repeated_value(lists: list):
    """(field, message) for the first value a sweep list repeats (a zip group: a row of values), or
    None: the point would be simulated once and listed twice."""
    for where, vals in lists:
        seen = {}
        for i, v in enumerate(vals):
            j = seen.setdefault(repr(v), i)
            if j != i:
                what = f"the values {short(v)} are" if isinstance(v, tuple) else f"{short(v)} is"
                return (f"{where}[{i}]", f"{what} listed twice (also {where}[{j}]); list each value once")
    return None


def sweep_count(sweep) -> int | None:
    """The number of points of a well-formed sweep (None while it is not one)."""
    if not isinstance(sweep, dict):
        return None
    n = 1
    for k, v in sweep.items():
        if k == ZIP_KEY:
            groups = zip_groups(v)
            if groups is None or not all(g and all(isinstance(x, list) for x in g.values()) for _, g in groups):
                return None
            n *= math.prod(min(len(x) for x in g.values()) for _, g in groups)
        elif isinstance(v, list):
            n *= len(v)
        else:
            return None
    return n


def expand(model) -> list:
    """The sweep's cartesian product as points (scenario order: the last sweep key varies fastest;
    a zip group is one axis, its fields' i-th values in one point)."""
    axes = sweep_axes(model.sweep)
    points, configs, refs = [], {}, {}
    total = math.prod(len(rows) for _, rows in axes)
    bar = Progress(total, enabled=None if total >= SHOW_EXPANSION else False, what=" expanding the sweep")
    for combo in itertools.product(*(rows for _, rows in axes)):
        bar.update()
        d = {n: x for (names, _), row in zip(axes, combo) for n, x in zip(names, row)}
        gpu = d.pop("gpu", model.gpu)
        kernel = d.pop("kernel", model.kernel)
        swept = {k[4:]: d.pop(k) for k in list(d) if k.startswith("gpu.")}
        ck = (gpu, json.dumps(swept, sort_keys=True, default=str))
        if ck not in configs:
            base = model.config(gpu)
            cfg, vals = with_overrides(base, swept, "sweep")
            fixed = {k: getattr(base, k) for k in model.gpu_overrides}
            configs[ck] = (cfg, cfg.config_hash(), {**fixed, **vals})
        cfg, h, ov = configs[ck]
        p = dict(model.params)
        p.update(d)
        kobj = model.kernel_obj(kernel)
        if kernel not in refs:
            refs[kernel] = (kernel_ref(kernel, model._base_dir), kernel_source_hash(kernel, model._base_dir))
        p = {k: v for k, v in p.items() if kobj.param(k)}
        try:
            resolved = kobj.resolve(p)
        except KernelParamError as e:
            raise field_error(f"params.{e.field}", f"{kernel}: {e}") from None
        cross = cross_problem(resolved)
        if cross:
            where = f"sweep.{cross[0]}" if cross[0] in model.sweep else f"params.{cross[0]}"
            raise field_error(where, f"{kernel}: {cross[1]}")
        points.append(Point(gpu, kernel, resolved, model.check, model.fidelity, cfg, h, ov, model.max_work,
                            *refs[kernel], calibration=model.calibration))
    bar.close()
    return points
