"""The apps depend on each other in one direction.

annotation holds the study data (models, import, sampling, what a reader is shown); consensus
builds the queues and routes ratings, on annotation's models; annotation's pages and API call
into consensus. So annotation's data modules never import consensus, and no module imports
another app inside a function to dodge an import cycle.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APPS = ("annotation", "consensus", "exports", "analysis", "judges")
# annotation's own data and rules: below consensus.
ANNOTATION_DATA = (
    "models", "services", "importing", "reading", "roles", "queues", "builtin_datasets", "forms", "guide", "practice",
)  # fmt: skip


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(module imported, whether the import is inside a function) for every import in a file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                found.extend((alias.name, in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                found.append((child.module, in_function))
            visit(child, nested)

    visit(tree, False)
    return found


def _app_modules(app: str) -> list[Path]:
    return [p for p in (ROOT / app).rglob("*.py") if "migrations" not in p.parts]


@pytest.mark.parametrize("module", ANNOTATION_DATA)
def test_annotations_data_modules_never_import_consensus(module):
    path = ROOT / "annotation" / f"{module}.py"
    if not path.exists():
        pytest.skip(f"annotation/{module}.py does not exist")
    assert [name for name, _ in _imports(path) if name.split(".")[0] == "consensus"] == []


@pytest.mark.parametrize("app", APPS)
def test_no_function_imports_another_app(app):
    if not (ROOT / app).is_dir():
        pytest.skip(f"no app {app}")
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in _app_modules(app)
        if path.name != "apps.py"  # AppConfig.ready() imports after the registry is ready, as Django asks
        for name, in_function in _imports(path)
        if in_function and name.split(".")[0] in APPS and name.split(".")[0] != app
    ]
    assert offenders == []
