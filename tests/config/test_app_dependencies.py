"""The apps depend on each other in one direction, written once in LAYERS (the README's Layout
section draws it); no module imports itself back through others; and no module imports another app
inside a function to dodge a cycle.
"""

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Each app, and the apps it may import. A new arrow goes here, where a reviewer sees it; the table
# itself must stay free of cycles (test_the_layers_have_no_cycle).
LAYERS: dict[str, set[str]] = {
    "annotation": set(),
    "consensus": {"annotation"},
    "judges": {"annotation"},
    "exports": {"annotation", "consensus", "judges"},
    "analysis": {"annotation", "exports", "judges"},
    "reading": {"annotation", "consensus", "judges"},
    "config": {"annotation", "consensus", "judges", "exports", "analysis", "reading"},
}
APPS = tuple(LAYERS)


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(module imported, whether the import is inside a function) for every import in a file; for
    `from package import name`, both the package and package.name (which may be a module)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                found.extend((alias.name, in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                found.append((child.module, in_function))
                found.extend((f"{child.module}.{alias.name}", in_function) for alias in child.names)
            visit(child, nested)

    visit(tree, False)
    return found


def _modules() -> dict[str, Path]:
    """Every module of the project's apps (migrations aside), by dotted name."""
    modules = {}
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _module_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {
        name: {imported for imported, _ in _imports(path) if imported in modules and imported != name}
        for name, path in modules.items()
    }


def test_every_app_is_in_the_layers():
    apps = {path.parent.name for path in ROOT.glob("*/apps.py")} | {"config"}
    assert apps == set(LAYERS)


def test_the_layers_have_no_cycle():
    list(TopologicalSorter(LAYERS).static_order())  # raises CycleError on a cycle


@pytest.mark.parametrize("app", APPS)
def test_an_app_imports_only_the_apps_below_it(app):
    offenders = sorted(
        f"{path.relative_to(ROOT)}: {name}"
        for path in (ROOT / app).rglob("*.py")
        if "migrations" not in path.parts
        for name, _ in _imports(path)
        if name.split(".")[0] in LAYERS and name.split(".")[0] not in LAYERS[app] | {app}
    )
    assert offenders == []


def test_no_module_imports_itself_back_through_others():
    graph = _module_graph()
    try:
        list(TopologicalSorter(graph).static_order())
    except CycleError as cycle:
        pytest.fail(f"import cycle: {' -> '.join(cycle.args[1])}")


@pytest.mark.parametrize("app", APPS)
def test_no_function_imports_another_app(app):
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in (ROOT / app).rglob("*.py")
        if "migrations" not in path.parts
        if path.name != "apps.py"  # AppConfig.ready() imports after the registry is ready, as Django asks
        for name, in_function in _imports(path)
        if in_function and name.split(".")[0] in APPS and name.split(".")[0] != app
    ]
    assert offenders == []
