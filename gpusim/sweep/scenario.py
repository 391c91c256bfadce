"""Scenario files: the pydantic model of a scenario YAML, loading it, and expanding its sweep into points.

A scenario names a GPU, a kernel, its params and an optional sweep (a cartesian product over
params, ``gpu``, ``kernel`` and GPU config fields written ``gpu.<field>``; fields listed under
``zip`` take their values together, the i-th of each list in one point, as one axis of the
product). ``load_scenario`` validates everything before any work starts: a mistake raises ``ScenarioError`` with one line
naming the file, the field path, the bad value and what is allowed. ``ScenarioFile`` is the
model (``gpusim schema`` prints its JSON Schema); running points is ``runner``'s job.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, ValidationInfo, WithJsonSchema
from pydantic import field_validator, model_validator
from pydantic_core import PydanticCustomError

from ..hardware import ConfigError, GPUConfig
from ..kernels import ALL_PARAM_NAMES, KERNELS, Kernel, KernelParamError, resolve_kernel
from ..precheck import max_work_problem, read_max_work
from ..bounds import PARAM_BOUNDS, bound_problem, cross_problem  # noqa: F401  (re-exported)
from .axes import (SHOW_EXPANSION, ZIP_KEY, expand, flat_sweep, repeated_value, sweep_axes,  # noqa: F401
                   sweep_count, sweep_paths, zip_groups)
from .kernel_files import is_file_kernel, kernel_ref, kernel_source_hash  # noqa: F401  (re-exported)
from .messages import did_you_mean, expected_value, short, taking  # noqa: F401
from .errors import RunError, ScenarioError, field_error  # noqa: F401  (re-exported: the errors of loading a scenario)
from .gpus import GPU_FIELDS, resolve_gpu, with_overrides
from .yamlio import apply_set, read_yaml, storage_path

# Refuse larger sweeps unless asked (--max-points): at the simulator's ~0.05-1 s per point a
# hundred thousand points is already hours of CPU, and a typo such as one extra list is
# usually what makes a sweep explode.
MAX_POINTS = 100_000
_Value = Annotated[Any, WithJsonSchema({"type": ["integer", "number", "boolean", "string"]})]
_LIST_SCHEMA = {"type": "array", "minItems": 1, "items": {"type": ["integer", "number", "boolean", "string"]}}
_GROUP_SCHEMA = {"type": "object", "minProperties": 1, "additionalProperties": _LIST_SCHEMA}
_SWEEP_SCHEMA = {"type": "object", "additionalProperties": _LIST_SCHEMA, "properties": {
    "zip": {"anyOf": [_GROUP_SCHEMA, {"type": "array", "minItems": 1, "items": _GROUP_SCHEMA}],
            "description": "fields whose equally long lists go together, the i-th values in one point "
                           "(one axis of the product); a list of such mappings for several groups"}}}


def _context_dir(info: ValidationInfo) -> Path:
    return Path((info.context or {}).get("base_dir", "."))


def kernel_of(name: str, base_dir: Path, fld: str = "kernel") -> Kernel:
    """The Kernel a scenario names: a built-in, ``path/to/file.py:name`` (relative to the scenario
    file's folder) or ``module:name``; a one-line field error otherwise."""
    if not is_file_kernel(name) and name not in KERNELS:
        raise field_error(fld, f"unknown kernel {short(name)}{did_you_mean(name, KERNELS)}; "
                               f"available: {', '.join(KERNELS)} (or path/to/file.py:name)")
    try:
        return resolve_kernel(name, base_dir)
    except KernelParamError as e:
        raise field_error(fld, str(e)) from None


class ScenarioFile(BaseModel):
    """A scenario YAML file. Unknown keys are errors; paths are relative to the file's folder."""

    model_config = ConfigDict(extra="forbid", title="gpusim scenario")

    name: str | None = Field(None, description="name of the run (default: the file name without .yaml)")
    description: str = Field("", description="free text")
    gpu: str = Field("h100", description="GPU config name (see `gpusim gpus`) or path to a GPU YAML, "
                                         "relative to the scenario file")
    kernel: str | None = Field(None, description="kernel name (see `gpusim kernels`) or path/to/file.py:name "
                                                 "(relative to the scenario file); required unless swept")
    params: dict[str, _Value] = Field({}, description="kernel parameters (defaults fill the rest)")
    sweep: Annotated[dict[str, list[_Value] | dict[str, list[_Value]]], WithJsonSchema(_SWEEP_SCHEMA)] = Field(
        {}, description="cartesian product: a list of values for any parameter, `gpu`, `kernel` or `gpu.<field>` "
                        "(a GPU config field, for hardware what-ifs); `zip: {field: [values], ...}` (or a list of "
                        "such mappings) pairs equally long lists value by value, as one axis of the product")
    check: Literal["auto"] | bool = Field("auto", description="compare against the numpy executor")
    fidelity: Literal["fast", "full"] = Field("fast", description="fast samples CTAs; full simulates all")
    calibration: Literal["on", "off", "transferred"] = Field(
        "on", description="on: the learned correction over the mechanistic time (docs/validation.md); off: the "
                          "mechanistic model alone; transferred: the correction every config shares")
    max_work: float | None = Field(None, gt=0, description="work limit of one point (see gpusim.precheck); "
                                                         "raise it for larger points")
    gpu_overrides: dict[str, Any] = Field({}, description="GPU config fields to change for every point "
                                                          "(`--set gpu.<field>=VALUE` writes here)")
    _configs: dict = PrivateAttr(default_factory=dict)   # GPU name -> (named config, with gpu_overrides)
    _kernels: dict = PrivateAttr(default_factory=dict)   # kernel as written -> Kernel
    _base_dir: Path = PrivateAttr(default=Path("."))

    @model_validator(mode="before")
    @classmethod
    def _size(cls, data, info: ValidationInfo):
        sweep = data.get("sweep") if isinstance(data, dict) else None
        limit = (info.context or {}).get("max_points", MAX_POINTS)
        n = sweep_count(sweep)
        if n is not None:
            if n > limit:
                raise field_error("sweep", f"{n:,} points (the product of the sweep lists' lengths, a zip group "
                                           f"counted once), more than the limit of {limit:,}; narrow the sweep, "
                                           f"or allow it with --max-points {n}")
        return data

    @field_validator("name", mode="before")
    @classmethod
    def _name(cls, v):
        if not isinstance(v, str) or not v:
            raise field_error("name", f"must be a non-empty string, got {short(v)}")
        return v

    @field_validator("description", mode="before")
    @classmethod
    def _description(cls, v):
        if not isinstance(v, str):
            raise field_error("description", f"must be a string, got {short(v)}")
        return v

    @field_validator("gpu", mode="before")
    @classmethod
    def _gpu(cls, v):
        if not isinstance(v, str) or not v:
            raise field_error("gpu", f"must be a GPU name (see `gpusim gpus`) or a path to a GPU YAML, got {short(v)}")
        return v

    @field_validator("kernel", mode="before")
    @classmethod
    def _kernel(cls, v, info: ValidationInfo):
        if v is not None:
            if not isinstance(v, str):
                raise field_error("kernel", f"unknown kernel {short(v)}; available: {', '.join(KERNELS)}")
            kernel_of(v, _context_dir(info))
        return v

    @field_validator("params", mode="before")
    @classmethod
    def _params(cls, v):
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise field_error("params", f"must be a mapping of parameter: value, got {short(v)}")
        return v

    @field_validator("sweep", mode="before")
    @classmethod
    def _sweep(cls, v, info: ValidationInfo):
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise field_error("sweep", f"must be a mapping of field: [values], got {short(v)}")
        groups = zip_groups(v.get(ZIP_KEY)) if ZIP_KEY in v else []
        if groups is None:
            raise field_error(f"sweep.{ZIP_KEY}", f"must be a mapping of field: [values] whose lists pair up value by "
                                                  f"value (or a list of such mappings), got {short(v[ZIP_KEY])}")
        seen = {k: f"sweep.{k}" for k in v if k != ZIP_KEY}
        for path, g in groups:
            if not g:
                raise field_error(path, "is empty; list the fields to zip, e.g. {gpu.sram_bytes_per_sm: [...], "
                                        "gpu.sram_bytes_per_cta_max: [...]}")
            for k in g:
                if k in seen or k == ZIP_KEY:
                    raise field_error(f"{path}.{k}", f"is swept twice (also as {seen.get(k, path)}); sweep a field once")
                seen[k] = f"{path}.{k}"
        flat = [(f"sweep.{k}", k, vals) for k, vals in v.items() if k != ZIP_KEY]
        flat += [(f"{path}.{k}", k, vals) for path, g in groups for k, vals in g.items()]
        kernel_list = next((vals for _, k, vals in flat if k == "kernel"), None)
        sweepable = ("gpu", "kernel") + ALL_PARAM_NAMES
        for where, k, vals in flat:
            if isinstance(k, str) and k.startswith("gpu.") and k[4:] not in GPU_FIELDS:
                raise field_error(where, f"unknown GPU field {k[4:]!r}{did_you_mean(k[4:], GPU_FIELDS)}; "
                                         f"GPU fields: {', '.join(GPU_FIELDS)}")
            file_kernels = any(is_file_kernel(x) for x in [info.data.get("kernel"), *(
                kernel_list if isinstance(kernel_list, list) else [])])
            if k not in sweepable and not str(k).startswith("gpu.") and not file_kernels:
                raise field_error(where, f"unknown parameter{did_you_mean(k, sweepable + (ZIP_KEY,))}; "
                                         f"sweepable: {', '.join(sweepable)}, gpu.<field>, {ZIP_KEY}")
            if not isinstance(vals, list):
                raise field_error(where, f"must be a list of values, e.g. [{short(vals)}], got {short(vals)}")
            if not vals:
                raise field_error(where, "is an empty list []; give at least one value")
        for path, g in groups:
            if len({len(vals) for vals in g.values()}) > 1:
                lens = ", ".join(f"{k} has {len(vals)}" for k, vals in g.items())
                raise field_error(path, f"zipped lists must be equally long (the i-th values go together), but {lens}")
        repeat = repeated_value([(f"sweep.{k}", vals) for k, vals in v.items() if k != ZIP_KEY]
                                + [(path, list(zip(*g.values()))) for path, g in groups])
        if repeat:
            raise field_error(*repeat)
        where = {k: w for w, k, _ in flat}
        for i, g in enumerate(next((vals for _, k, vals in flat if k == "gpu"), [])):
            if not isinstance(g, str) or not g:
                raise field_error(f"{where['gpu']}[{i}]",
                           f"must be a GPU name (see `gpusim gpus`) or a path to a GPU YAML, got {short(g)}")
        for i, k in enumerate(kernel_list or []):
            if not isinstance(k, str):
                raise field_error(f"{where['kernel']}[{i}]", f"unknown kernel {short(k)}; available: {', '.join(KERNELS)}")
            kernel_of(k, _context_dir(info), f"{where['kernel']}[{i}]")
        return v

    @field_validator("check", mode="before")
    @classmethod
    def _check(cls, v):
        if not (v == "auto" or isinstance(v, bool)):
            raise field_error("check", f"must be auto, true or false, got {short(v)}")
        return v

    @field_validator("fidelity", mode="before")
    @classmethod
    def _fidelity(cls, v):
        if v not in ("fast", "full"):
            raise field_error("fidelity", f"must be fast or full, got {short(v)}")
        return v

    @field_validator("max_work", mode="before")
    @classmethod
    def _max_work(cls, v):
        v = read_max_work(v)
        why = max_work_problem(v)
        if why:
            raise field_error("max_work", f"{why}, got {short(v)}")
        return v

    @field_validator("gpu_overrides", mode="before")
    @classmethod
    def _gpu_overrides(cls, v):
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise field_error("gpu_overrides", f"must be a mapping of GPU field: value, got {short(v)}")
        for k in v:
            if k not in GPU_FIELDS:
                raise field_error(f"gpu_overrides.{k}", f"unknown GPU field {k!r}{did_you_mean(k, GPU_FIELDS)}; "
                                                 f"GPU fields: {', '.join(GPU_FIELDS)}")
        return v

    # ------------------------------------------------------------------ checks across fields
    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo):
        kernels = self.kernels()
        if kernels == [None]:
            raise field_error("kernel", f"missing; choose one of {', '.join(KERNELS)}")
        self._base_dir = _context_dir(info)
        for k in kernels:
            self._kernels[k] = kernel_of(k, self._base_dir)
        taken = list(dict.fromkeys(p.name for k in kernels for p in self._kernels[k].params))
        for pname, val in self.params.items():
            if pname not in ALL_PARAM_NAMES and pname not in taken:
                raise field_error(f"params.{pname}", f"unknown parameter{did_you_mean(pname, taken)}; "
                                              f"{taking(kernels, 'take')}: {', '.join(taken)}")
            if pname not in taken:
                raise field_error(f"params.{pname}", f"{taking(kernels, 'do')} not take {pname!r}"
                                              f"{did_you_mean(pname, taken)}; parameters: {', '.join(taken)}")
            _check_value(f"params.{pname}", self._kernels, pname, val)
        paths = sweep_paths(self.sweep)
        for pname, vals in flat_sweep(self.sweep).items():
            if pname in ("gpu", "kernel") or pname.startswith("gpu."):
                continue
            if pname not in taken:
                raise field_error(paths[pname], f"{taking(kernels, 'do')} not take {pname!r}; "
                                             f"parameters: {', '.join(taken)}")
            for i, v in enumerate(vals):
                _check_value(f"{paths[pname]}[{i}]", self._kernels, pname, v)
        base_dir = self._base_dir
        swept = "gpu" in paths
        for i, g in enumerate(self.gpus()):
            if g in self._configs:
                continue
            where = f"{paths['gpu']}[{i}]" if swept else "gpu"
            try:
                cfg = resolve_gpu(g, base_dir)
            except ConfigError as e:
                raise field_error(where, str(e)) from None
            fixed, _ = with_overrides(cfg, self.gpu_overrides, "gpu_overrides")
            for k, vals in self.sweep.items():
                if k.startswith("gpu."):
                    for j, v in enumerate(vals):
                        with_overrides(fixed, {k[4:]: v}, f"sweep.{k}[{j}]")
            for path, grp in zip_groups(self.sweep.get(ZIP_KEY)) or []:     # zipped fields: checked together
                gk = [k for k in grp if k.startswith("gpu.")]
                for j in range(len(grp[gk[0]]) if gk else 0):
                    with_overrides(fixed, {k[4:]: grp[k][j] for k in gk}, f"{path}[{j}]")
            self._configs[g] = (cfg, fixed)
        return self

    def kernels(self) -> list:
        return list(dict.fromkeys(flat_sweep(self.sweep).get("kernel", [self.kernel])))

    def kernel_obj(self, name: str) -> Kernel:
        """The resolved Kernel of ``name`` (a kernel of this scenario)."""
        return self._kernels[name]

    def gpus(self) -> list:
        return list(flat_sweep(self.sweep).get("gpu", [self.gpu]))

    def config(self, gpu: str, named: bool = False) -> GPUConfig:
        """The GPU config of ``gpu`` (a name from this scenario) with the fixed ``gpu_overrides``
        applied, or as named (``named=True``)."""
        return self._configs[gpu][0 if named else 1]


def _check_value(fld: str, kernels: dict, name: str, val):
    """Validate one parameter value against every kernel in the scenario that takes it."""
    if val is None:
        raise field_error(fld, f"no value given; expected {expected_value(name)}")
    for k in kernels.values():
        if k.param(name) is None:
            continue
        try:
            why = bound_problem(name, k.resolve({name: val})[name])
        except KernelParamError as e:
            raise field_error(fld, str(e)) from None
        if why:
            raise field_error(fld, why)


@dataclass
class Scenario:
    name: str
    source: str
    data: dict          # the resolved scenario (after --set overrides)
    points: list
    param_names: list
    config_hashes: dict  # GPU name -> hash of the named config (before overrides)
    overrides: list = field(default_factory=list)
    gpu_override_fields: list = field(default_factory=list)


class _Checker:
    """Turns the model's first error into one line; a field that came from ``--set`` says so."""

    def __init__(self, src: str, overrides: list):
        self.src = src
        self.sets = [(".".join(storage_path(a.split("=", 1)[0])), a) for a in overrides or [] if "=" in a]

    def err(self, fld: str, msg: str) -> ScenarioError:
        base = re.sub(r"\[\d+\]", "", fld)
        for key, a in self.sets:
            if base == key or base.startswith(key + ".") or key.startswith(base + "."):
                return ScenarioError(f"{self.src}: {fld} (from --set {a}): {msg}")
        return ScenarioError(f"{self.src}: {fld}: {msg}")

    def first(self, e: ValidationError) -> ScenarioError:
        errs = sorted(e.errors(), key=lambda x: x["type"] != "extra_forbidden")
        x = errs[0]
        if x["type"] == "extra_forbidden":
            k = x["loc"][0]
            hint = (f" (did you mean 'params.{k}'?)" if k in ALL_PARAM_NAMES else did_you_mean(k, TOP_KEYS))
            return self.err(str(k), f"unknown key{hint}; allowed: {', '.join(TOP_KEYS)}")
        ctx = x.get("ctx") or {}
        if x["type"] == "scenario":
            return self.err(ctx["field"], ctx["message"])
        loc = ".".join(str(p) for p in x["loc"]) or "(top level)"
        return self.err(loc, f"{x['msg']}, got {short(x.get('input'))}")


TOP_KEYS = tuple(ScenarioFile.model_fields)


def load_scenario(path: str | Path, overrides: list | None = None, data: dict | None = None,
                  max_points: int | None = None) -> Scenario:
    """Read, override (``--set``) and validate a scenario; expand its sweep into points (at most
    ``max_points``, default ``MAX_POINTS``)."""
    src = str(path)
    ck = _Checker(src, overrides)
    if data is None:
        data = read_yaml(path)
    if data is None:
        raise ScenarioError(f"{src}: the file is empty; expected a mapping with keys {', '.join(TOP_KEYS)}")
    if not isinstance(data, dict):
        raise ScenarioError(f"{src}: expected a mapping with keys {', '.join(TOP_KEYS)}, "
                            f"got a {type(data).__name__} (is it a scenario file?)")
    data = apply_set(data, overrides)
    try:
        model = ScenarioFile.model_validate(data, context={"base_dir": Path(src).parent,
                                                           "max_points": max_points or MAX_POINTS})
    except ValidationError as e:
        raise ck.first(e) from None
    try:
        points = expand(model)
    except ValidationError as e:
        raise ck.first(e) from None
    except PydanticCustomError as e:
        raise ck.err(e.context["field"], e.context["message"]) from None
    param_names = [p for p in ALL_PARAM_NAMES if any(p in pt.params for pt in points)]
    param_names += list(dict.fromkeys(p for pt in points for p in pt.params if p not in param_names))
    hashes = {g: model.config(g, named=True).config_hash() for g in model.gpus()}
    fields = list(model.gpu_overrides) + [k[4:] for k in flat_sweep(model.sweep) if k.startswith("gpu.")]
    return Scenario(model.name or Path(src).stem, src, data, points, param_names, hashes, list(overrides or []),
                    list(dict.fromkeys(fields)))
