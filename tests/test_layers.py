"""The package's layers: every gpusim import (module-level or inside a function) goes to a module on
the same floor or a lower one, and every module has a floor. Floors, lowest first: the DSL and the
low-level readers; the GPU config; the Triton toolchain (lowering, compiling, the SASS reader); the
compiler's view and the executing backends; the timing model; its calibration; results; the kernels;
the API; models and output; sweeps; tuning and the hardware tools; the CLI."""
import sys

import pytest

from tests.test_imports import MODULES, PKG, _imports

FLOORS = {  # module or package prefix -> floor; the longest prefix wins
    "gpusim.dsl": 0, "gpusim.errors": 0, "gpusim.yamlio": 0, "gpusim.physics": 0, "gpusim.provenance": 0,
    "gpusim.plausible": 0, "gpusim.config_io": 0, "gpusim.whatif": 0, "gpusim.bounds": 0,
    "gpusim.hardware": 1, "gpusim.intervals": 1, "gpusim.overrides": 1,
    "gpusim.toolchain": 2,                                  # lowering to Triton, compiling it, reading SASS
    "gpusim.compiler": 3, "gpusim.precheck": 3,
    "gpusim.backends": 3,                                   # numpy_exec; triton (runs the lowered source)
    "gpusim.backends.sim": 4, "gpusim.lower_bound": 4,      # the timing model and its cheap lower bound
    "gpusim.calibration": 5,                                # reads the model's breakdown, imports numpy only
    "gpusim.result": 6,
    "gpusim.kernels": 7, "gpusim.frontends": 7,             # built-in kernels; kernels from Triton functions
    "gpusim.api": 8,
    "gpusim.models": 9, "gpusim.output": 9,
    "gpusim.sweep": 10,
    "gpusim.tune": 11, "gpusim.tune_search": 11, "gpusim.tune_store": 11, "gpusim.hw": 11,
    "gpusim.cli": 12, "gpusim.__main__": 12,
}


def floor(mod: str):
    best = max((p for p in FLOORS if mod == p or mod.startswith(p + ".")), key=len, default=None)
    return None if best is None else FLOORS[best]


def test_every_module_has_a_floor():
    assert not [m for m in MODULES if m != "gpusim" and floor(m) is None]


def test_no_module_imports_a_higher_floor():
    up = []
    for m in MODULES:
        if m == "gpusim":           # the package re-exports the public API
            continue
        for target, names in _imports(m):
            if target == "gpusim" and set(names) <= {"__version__"}:
                continue            # the version string, defined at the top
            if target not in MODULES:
                continue
            if MODULES[m].name == "__init__.py" and target.startswith(m + "."):
                continue
            if floor(target) > floor(m):
                up.append(f"{m} (floor {floor(m)}) imports {target} (floor {floor(target)})")
    assert not up, up


def test_the_floors_are_checked():
    assert floor("gpusim.backends.sim.engine") > floor("gpusim.compiler.view") > floor("gpusim.hardware")
    assert floor("gpusim.sweep.yamlio") > floor("gpusim.yamlio")
    # the toolchain sits below the compiler's view that reads it, and below the backend that runs its source
    assert floor("gpusim.compiler.view") > floor("gpusim.toolchain.compile") > floor("gpusim.hardware")
    assert floor("gpusim.backends.triton.run") > floor("gpusim.toolchain.lower")
    assert floor("gpusim.result") > floor("gpusim.calibration.model") > floor("gpusim.backends.sim.engine")


def test_an_upward_import_is_caught(monkeypatch):
    """The check itself fails on an upward import: a toolchain module importing the compiler's view."""
    real = _imports

    def planted(mod):
        yield from real(mod)
        if mod == "gpusim.toolchain.compile":
            yield "gpusim.compiler.view", ["compiler_view"]

    monkeypatch.setattr(sys.modules[__name__], "_imports", planted)
    with pytest.raises(AssertionError, match="gpusim.toolchain.compile .* imports gpusim.compiler.view"):
        test_no_module_imports_a_higher_floor()


# --------------------------------------------------------------------------- size
MAX_FILE_LINES, MAX_FUNCTION_LINES = 400, 60
# Still over, to be split (each entry must still be over: remove it once it is split).
LONG_FILES = set()
LONG_FUNCTIONS: set = set()


def _sizes():
    import ast

    files, functions = {}, {}
    for path in MODULES.values():
        rel = path.relative_to(PKG.parent).as_posix()
        text = path.read_text()
        files[rel] = text.count("\n") + (not text.endswith("\n"))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions[f"{rel} {node.name}"] = max(functions.get(f"{rel} {node.name}", 0),
                                                      node.end_lineno - node.lineno + 1)
    return files, functions


def test_no_file_over_400_lines():
    files, _ = _sizes()
    long = {f for f, n in files.items() if n > MAX_FILE_LINES}
    assert long <= LONG_FILES, sorted(long - LONG_FILES)
    assert long >= LONG_FILES, f"split now, remove from LONG_FILES: {sorted(LONG_FILES - long)}"


def test_no_function_over_60_lines():
    _, functions = _sizes()
    long = {f for f, n in functions.items() if n > MAX_FUNCTION_LINES}
    assert long <= LONG_FUNCTIONS, sorted(long - LONG_FUNCTIONS)
    assert long >= LONG_FUNCTIONS, f"split now, remove from LONG_FUNCTIONS: {sorted(LONG_FUNCTIONS - long)}"
