"""The package's layers: every gpusim import (module-level or inside a function) goes to a module on
the same floor or a lower one, and every module has a floor. Floors, lowest first: the DSL and the
low-level readers; the GPU config; the compiler's view and its Triton source; the timing model;
results; the kernels; the API; models and output; sweeps; tuning and the hardware tools; the CLI."""
from tests.test_imports import MODULES, PKG, _imports

FLOORS = {  # module or package prefix -> floor; the longest prefix wins
    "gpusim.dsl": 0, "gpusim.errors": 0, "gpusim.yamlio": 0, "gpusim.physics": 0, "gpusim.provenance": 0,
    "gpusim.plausible": 0, "gpusim.config_io": 0, "gpusim.whatif": 0, "gpusim.bounds": 0,
    "gpusim.hardware": 1, "gpusim.intervals": 1, "gpusim.overrides": 1,
    "gpusim.backends": 2, "gpusim.backends.triton": 2,      # lowering to Triton and compiling it
    "gpusim.compiler": 3, "gpusim.precheck": 3, "gpusim.backends.numpy_exec": 3,
    "gpusim.backends.sim": 4,
    "gpusim.result": 5,
    "gpusim.kernels": 6,
    "gpusim.api": 7,
    "gpusim.models": 8, "gpusim.output": 8,
    "gpusim.sweep": 9,
    "gpusim.tune": 10, "gpusim.hw": 10,
    "gpusim.cli": 11, "gpusim.__main__": 11,
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
