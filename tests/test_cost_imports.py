"""The cost model's modules and the kernel structure they read import no circle, and the
structure does not depend on pricing (issue 35, step 3).

The imports are read from the source with `ast` (every `import` and `from ... import`,
also those inside functions, which are imports all the same), so that a circle hidden by a
lazy import is found too."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("hlopass.cost", "hlopass.kernel_structure")


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / Path(*pkg.split("."))).glob("*.py")):
            out[_module_name(path)] = path
    return out


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Modules of `known` that `name` imports (`from pkg import mod` names the module)."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            if t in known and t != name:
                found.add(t)
    return found


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    known = set(mods)
    return {name: _imports(name, path, known) for name, path in mods.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of `graph` (as a path that returns to its start), None if none."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                return [*stack[stack.index(m) :], m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_the_walk_sees_the_modules_and_their_imports():
    graph = _graph()
    assert "hlopass.cost.model" in graph and "hlopass.kernel_structure.emitter" in graph
    assert "hlopass.cost.kernel_analysis" in graph["hlopass.cost.model"]
    assert "hlopass.kernel_structure.shapes" in graph["hlopass.kernel_structure.emitter"]


def test_the_walk_finds_a_circle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_circle_among_cost_and_structure_modules():
    assert _cycle(_graph()) is None


def test_structure_does_not_import_pricing():
    graph = _graph()
    for name, deps in graph.items():
        if name.startswith("hlopass.kernel_structure"):
            assert not {d for d in deps if d.startswith("hlopass.cost")}, name
