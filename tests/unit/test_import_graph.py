"""The orchestrator's modules import each other without cycles, lazy (function-level) imports included.

A cycle hidden in a function-level import still ties two modules together: neither can be understood, tested or
moved alone. The graph is read with `ast` (no module is imported), every `import`/`from ... import` anywhere in a
module counts, relative imports are resolved, and `from package import name` is an edge to the submodule `name`
when there is one (else to the package).
"""

from __future__ import annotations

import ast
from pathlib import Path

from orchestrator import paths

ROOT = paths.PROJECT_ROOT / "orchestrator"


def module_name(file: Path) -> str:
    parts = list(file.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(f): f for f in sorted(ROOT.rglob("*.py")) if "templates" not in f.relative_to(ROOT).parts}


def imports_of(name: str, file: Path, known: set[str]) -> set[str]:
    """The modules of the orchestrator that ``name`` (defined in ``file``) imports, anywhere in its body."""
    package = name if file.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def add(target: str) -> None:
        while target and target not in known:  # an attribute of a module: the module itself
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)

    for node in ast.walk(ast.parse(file.read_text(), str(file))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                add(sub if sub in known else base)
    return found


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(name, file, known) for name, file in mods.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path that ends where it starts, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_the_graph_is_read() -> None:
    graph = import_graph()
    assert "orchestrator.runs" in graph["orchestrator.cli.run"]  # a function-level import
    assert "orchestrator.gateway.context" in graph["orchestrator.gateway.tools.base"]  # a relative import
    assert "orchestrator.gateway.tools.registry" in graph["orchestrator.gateway.tools"]  # in an __init__


def test_find_cycle_names_the_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "d": {"a", "c"}}) is None


def test_no_import_cycles() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def private_imports(file: Path, known: set[str]) -> list[str]:
    """Where ``file`` takes another module's private name: ``from orchestrator.x import _y`` (at any depth), or
    ``x._y`` on a module ``x`` of the orchestrator bound by an import. Dunder names are public by convention."""
    def private(name: str) -> bool:
        return name.startswith("_") and not name.startswith("__")

    tree = ast.parse(file.read_bytes(), str(file))
    found: list[str] = []
    bound: dict[str, str] = {}  # local name -> orchestrator module it is bound to
    here = module_name(file) if file.is_relative_to(ROOT) else ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known and alias.asname:
                    bound[alias.asname] = alias.name
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        source = node.module or ""
        if node.level:  # relative: resolved against the importing module's package
            package = here if file.name == "__init__.py" else here.rpartition(".")[0]
            parts = package.split(".")
            source = ".".join(parts[: len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
        if not source.startswith("orchestrator"):
            continue
        for alias in node.names:
            if private(alias.name):
                found.append(f"{file.name}:{node.lineno} from {source} import {alias.name}")
            elif f"{source}.{alias.name}" in known:
                bound[alias.asname or alias.name] = f"{source}.{alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound \
                and private(node.attr):
            found.append(f"{file.name}:{node.lineno} {bound[node.value.id]}.{node.attr}")
    return found


def test_private_import_check_reads_both_forms(tmp_path: Path) -> None:
    known = set(modules())
    file = tmp_path / "m.py"
    file.write_text("from orchestrator.harness.verify import _x, group_by_environment\n"
                    "from orchestrator.evaluation import ciso\n"
                    "def f():\n    from orchestrator.awx import _Dumper\n    return ciso._rego_child, ciso.score\n")
    assert private_imports(file, known) == ["m.py:1 from orchestrator.harness.verify import _x",
                                            "m.py:4 from orchestrator.awx import _Dumper",
                                            "m.py:5 orchestrator.evaluation.ciso._rego_child"]


def test_no_private_name_crosses_modules() -> None:
    """A leading underscore says "only this module uses it": a name another module needs is public, or the two
    modules share a third one that owns it."""
    known = set(modules())
    files = [*modules().values(), *sorted((paths.PROJECT_ROOT / "tests").rglob("*.py")),
             *sorted((paths.PROJECT_ROOT / "roles").glob("*/library/*.py"))]
    found = [hit for f in files for hit in private_imports(f, known)]
    assert not found, "private names taken across modules:\n" + "\n".join(found)


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between the orchestrator's folders (subpackages) and top-level modules: an edge where any module of
    one imports any module of the other."""
    def unit(module: str) -> str:
        return ".".join(module.split(".")[:2])

    folders: dict[str, set[str]] = {}
    for source, targets in graph.items():
        for target in targets:
            if unit(source) != unit(target):
                folders.setdefault(unit(source), set()).add(unit(target))
    return folders


def test_folder_graph_collapses_modules() -> None:
    graph = {"orchestrator.a.x": {"orchestrator.b.y"}, "orchestrator.b.z": {"orchestrator.a.w", "orchestrator.b.y"}}
    assert find_cycle(folder_graph(graph)) == ["orchestrator.a", "orchestrator.b", "orchestrator.a"]


def test_no_two_way_ties_between_folders() -> None:
    """A folder that imports another which imports it back is one folder in two places: what both need belongs in
    a lower module (as `role_topology` for `validate` and `evaluation`)."""
    cycle = find_cycle(folder_graph(import_graph()))
    assert cycle is None, "folders tied both ways: " + " -> ".join(cycle or [])
