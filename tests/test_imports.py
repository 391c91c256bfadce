"""The package's import graph: no cycles (module-level and function-level imports alike), and no
module importing another module's private (_underscore) names."""
import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "gpusim"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in PKG.rglob("*.py")}


def _resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(mod: str):
    """(imported gpusim module, names taken from it) for every import statement of ``mod``."""
    path = MODULES[mod]
    is_pkg = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "gpusim":
                    yield a.name, []
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(mod, is_pkg, node)
            if target.split(".")[0] != "gpusim":
                continue
            names = []
            for a in node.names:
                sub = f"{target}.{a.name}"
                if sub in MODULES:          # ``from . import ir`` imports the module gpusim.<pkg>.ir
                    yield sub, []
                else:
                    names.append(a.name)
            yield target, names


def _graph() -> dict:
    return {m: {t for t, _ in _imports(m) if t in MODULES and t != m} for m in MODULES}


def test_the_walk_sees_the_package():
    g = _graph()
    assert {"gpusim.api", "gpusim.backends.sim.engine", "gpusim.dsl.ir"} <= set(g)
    assert "gpusim.dsl.ir" in g["gpusim.backends.sim.engine"]
    assert "gpusim.backends.sim.under_load" in g["gpusim.api"]


def test_no_import_cycles():
    g = _graph()
    # a package's __init__ importing its own submodules is how packages re-export; not a cycle of logic
    edges = {m: {t for t in ts if not (MODULES[m].name == "__init__.py" and t.startswith(m + "."))}
             for m, ts in g.items()}
    state, stack, cycles = {}, [], []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for t in sorted(edges[m]):
            if state.get(t) == "open":
                cycles.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = "done"

    for m in sorted(edges):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_no_private_names_imported_across_modules():
    bad = []
    for m in MODULES:
        for target, names in _imports(m):
            bad += [f"{m} imports {target}.{n}" for n in names
                    if n.startswith("_") and not n.endswith("__") and target != m]
            if target.rsplit(".", 1)[-1].startswith("_") and not target.endswith("__init__"):
                bad.append(f"{m} imports private module {target}")
    assert not bad, bad
