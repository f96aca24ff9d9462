"""The library's import graph: no circles, no underscore names taken across modules.

Every module of `hlopass/`, `dialects/` (installed as `hlopass.dialects`) and `passes/`
(`hlopass.passes`) is read as source, not imported: each `import` and `from ... import` that
runs is an edge, at module level or inside a function (a lazy import still ties the two
modules together), except those under `if TYPE_CHECKING:`, which never run.

`python tests/test_import_graph.py` prints every circle and every private import found.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
# source folder -> the package it is installed as (pyproject.toml's package-dir)
PACKAGES = {"hlopass": "hlopass", "dialects": "hlopass.dialects", "passes": "hlopass.passes"}


def library_modules() -> dict[str, Path]:
    """Dotted module name -> source file, for every library module."""
    out: dict[str, Path] = {}
    for folder, package in PACKAGES.items():
        base = ROOT / folder
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join([package, *parts])] = path
    return out


@dataclass(frozen=True)
class Import:
    """One runtime import of a library module: who imports, what, which names, where."""

    importer: str
    target: str
    names: tuple[str, ...]
    line: int


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node that may run: all of them but the bodies of `if TYPE_CHECKING:`."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _absolute(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute name a (possibly relative) `from` import refers to."""
    if level == 0:
        return name or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def imports_of(module: str, path: Path, known: set[str]) -> Iterator[Import]:
    """The runtime imports of library modules that `module` makes."""
    tree = _tree(path)
    is_package = path.name == "__init__.py"
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    yield Import(module, alias.name, (), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, is_package, node.level, node.module)
            names: list[str] = []
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in known:  # `from package import submodule`
                    yield Import(module, sub, (), node.lineno)
                else:
                    names.append(alias.name)
            if names and source in known:
                yield Import(module, source, tuple(names), node.lineno)


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def private_attributes(module: str, path: Path, known: set[str]) -> Iterator[str]:
    """`alias._name` where `alias` is a library module bound by an import (`import a.b`,
    `import a.b as m`, `from a import b`): a private import by another spelling."""
    tree = _tree(path)
    is_package = path.name == "__init__.py"
    bound: dict[str, str] = {}
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:  # `import a.b` binds `a`
                    head = alias.name.split(".")[0]
                    bound[head] = head
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, is_package, node.level, node.module)
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{source}.{alias.name}"
    for node in _runtime_nodes(tree):
        if not (isinstance(node, ast.Attribute) and _private(node.attr)):
            continue
        dotted = _dotted(node.value)
        if dotted is None:
            continue
        head, _, rest = dotted.partition(".")
        target = bound.get(head, "") + (f".{rest}" if rest else "")
        if target in known and target != module:
            yield f"{module}:{node.lineno}: {node.attr} of {target}"


def all_imports() -> list[Import]:
    mods = library_modules()
    known = set(mods)
    return [imp for name, path in mods.items() for imp in imports_of(name, path, known)]


def import_graph(imports: list[Import]) -> nx.DiGraph:
    graph = nx.DiGraph()
    for imp in imports:
        if imp.target != imp.importer:
            graph.add_edge(imp.importer, imp.target, line=imp.line)
    return graph


def circles(graph: nx.DiGraph) -> list[str]:
    """One circle through each knot (strongly connected set of two or more modules), each
    written as the chain of imports that closes it, with the importing line."""
    out = []
    knots = sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)
    for knot in knots:
        cycle = nx.find_cycle(graph.subgraph(knot), source=knot[0])
        steps = [f"{a}:{graph.edges[a, b]['line']}" for a, b in cycle]
        chain = " -> ".join(steps) + f" -> {cycle[0][0]}"
        out.append(f"{len(knot)} modules ({', '.join(knot)}): {chain}")
    return out


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(imports: list[Import]) -> list[str]:
    """`from M import _name` across modules, and private submodules taken from outside
    their own package."""
    out = []
    for imp in imports:
        where = f"{imp.importer}:{imp.line}"
        for name in imp.names:
            if _private(name) and imp.target != imp.importer:
                out.append(f"{where}: {name} from {imp.target}")
        leaf = imp.target.rsplit(".", 1)[-1]
        owner = imp.target.rsplit(".", 1)[0]
        if _private(leaf) and not imp.importer.startswith(owner + "."):
            out.append(f"{where}: private module {imp.target}")
    return out


def test_no_import_circles():
    found = circles(import_graph(all_imports()))
    assert found == [], f"{len(found)} import circles:\n" + "\n".join(found)


def all_private_attributes() -> list[str]:
    mods = library_modules()
    known = set(mods)
    return [use for name, path in mods.items() for use in private_attributes(name, path, known)]


def test_no_private_names_across_modules():
    found = private_imports(all_imports()) + all_private_attributes()
    assert found == [], f"{len(found)} private imports across modules:\n" + "\n".join(found)


def test_graph_sees_lazy_and_skips_type_checking_imports(tmp_path):
    """The reader counts an import inside a function and skips one under TYPE_CHECKING."""
    src = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from hlopass.b import _T\n"
        "def f():\n    from hlopass.c import _g\n    import hlopass.d\n"
        "    return hlopass.d._h\n"
    )
    path = tmp_path / "a.py"
    path.write_text(src)
    known = {"hlopass.a", "hlopass.b", "hlopass.c", "hlopass.d"}
    got = list(imports_of("hlopass.a", path, known))
    assert sorted((i.target, i.names) for i in got) == [("hlopass.c", ("_g",)), ("hlopass.d", ())]
    assert private_imports(got) == ["hlopass.a:5: _g from hlopass.c"]
    assert list(private_attributes("hlopass.a", path, known)) == ["hlopass.a:7: _h of hlopass.d"]


if __name__ == "__main__":
    found_imports = all_imports()
    cs = circles(import_graph(found_imports))
    ps = private_imports(found_imports) + all_private_attributes()
    print(f"{len(cs)} circles:", *cs, sep="\n  ")
    print(f"{len(ps)} private imports:", *ps, sep="\n  ")
    sys.exit(1 if cs or ps else 0)
