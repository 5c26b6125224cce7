"""The package's shape (the layout in docs/development.md): no import cycle, and the layers that must not
know Dagster (Spark jobs, job specs, lineage, streaming, stack) do not import it, lazily or not."""

from __future__ import annotations

import ast
from pathlib import Path

from lineage_assets.settings import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "lineage_assets"
DAGSTER_FREE = [
    "lineage_assets.job_specs",
    "lineage_assets.datasets",
    "lineage_assets.settings",
    "lineage_assets.lineage",
    "lineage_assets.streaming",
    "lineage_assets.stack",
    "spark",
]


def module_name(path: Path) -> str:
    parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every module the file imports, at any depth of its code (function-level imports included)."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def package_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports."""
    files = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    return {
        name: {target for target in imports(path) if target in files and target != name} for name, path in files.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import loops: each a path that comes back to where it started."""
    found, state = [], {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                found.append(path[path.index(target) :] + [target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return found


def test_cycles_finds_a_loop_and_passes_a_tree():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_the_package_has_no_import_cycle():
    assert cycles(package_graph()) == []


def test_the_layers_below_dagster_do_not_import_it():
    offenders = []
    for path in [*PACKAGE.rglob("*.py"), *(PROJECT_ROOT / "spark").glob("*.py")]:
        name = module_name(path)
        if any(name == layer or name.startswith(f"{layer}.") for layer in DAGSTER_FREE):
            # The docker backend borrows dagster-docker's config validators: a library, not the orchestrator.
            offenders += [f"{name} imports {target}" for target in imports(path) if target.split(".")[0] == "dagster"]
    assert offenders == []
