"""xDSL's private fields are touched only where a benchmark pays for it.

The speed layer (the dialect's fast constructors, the parser's block
linker, the printer, the worklist driver) walks xDSL's linked lists and
tuples directly because the public properties cost measurable time in
`benchmarks/io_bench.py` and `benchmarks/fixpoint_bench.py`.  Everywhere
else such access is debt: a new xDSL release may rename a field and break
a pass silently.  This test keeps the debt from growing: the speed-layer
files are allowed outright, the files still being migrated have a ceiling
that may only go down, and every other file must use xDSL's public API.

Run as a script it prints the accesses per file.
"""

from __future__ import annotations

import ast
import collections
import inspect
import pathlib

import xdsl.ir

ROOT = pathlib.Path(__file__).resolve().parent.parent
LIBRARY = ("hlopass", "dialects", "passes")

# Path prefixes (so `hlopass/rewriting.py` and a future `hlopass/rewriting/`
# match alike) of the speed layer, each with the benchmark that pays for it.
ALLOWED = {
    "dialects/hlo.py": "benchmarks/io_bench.py (fast op constructors; retype_result, which xDSL has no public API for)",
    "hlopass/text/exporter.py": "benchmarks/io_bench.py (printer walk)",
    "hlopass/text/parse_normalize.py": "benchmarks/io_bench.py (block linking)",
    "hlopass/text/parse_instructions.py": "benchmarks/io_bench.py (type lookups)",
    "hlopass/driver/worklist.py": "benchmarks/fixpoint_bench.py (worklist walk)",
}

# Files not yet moved onto public helpers: the count may only go down.
CEILING: dict[str, int] = {}


def xdsl_private_names() -> frozenset[str]:
    """Single-underscore members of xdsl.ir's classes (methods, slots, fields).

    Derived from xDSL itself rather than a hand list, so a field xDSL adds is
    caught without editing this test.
    """
    names: set[str] = set()
    for cls in vars(xdsl.ir).values():
        if not (inspect.isclass(cls) and cls.__module__.startswith("xdsl")):
            continue
        members = [
            *dir(cls),
            *(getattr(cls, "__slots__", ()) or ()),
            *getattr(cls, "__dataclass_fields__", {}),
        ]
        names.update(m for m in members if m.startswith("_") and not m.startswith("__"))
    # typing and abc plumbing, not IR state
    return frozenset(names - {"_abc_impl", "_is_protocol", "_OperationType"})


def _own_names(tree: ast.Module) -> set[str]:
    """Underscore names a module defines itself (methods, `self._x = ...`):
    `self._index(...)` on the module's own class is not xDSL's field."""
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            own.add(node.name)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            own.add(node.attr)
    return own


def accesses() -> dict[str, collections.Counter[str]]:
    names = xdsl_private_names()
    found: dict[str, collections.Counter[str]] = {}
    for top in LIBRARY:
        for path in sorted((ROOT / top).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            own = _own_names(tree)
            counts: collections.Counter[str] = collections.Counter()
            for node in ast.walk(tree):
                if not (isinstance(node, ast.Attribute) and node.attr in names):
                    continue
                if (
                    isinstance(node.value, ast.Name)
                    and node.value.id == "self"
                    and node.attr in own
                ):
                    continue
                counts[node.attr] += 1
            if counts:
                found[path.relative_to(ROOT).as_posix()] = counts
    return found


def _match(rel: str, table: dict) -> str | None:
    return next((p for p in table if rel.startswith(p)), None)


def test_private_fields_only_in_the_speed_layer() -> None:
    found = accesses()
    per_prefix: collections.Counter[str] = collections.Counter()
    stray = []
    for rel, counts in found.items():
        if _match(rel, ALLOWED):
            continue
        prefix = _match(rel, CEILING)
        if prefix is None:
            stray.append(f"{rel}: {dict(counts)}")
        else:
            per_prefix[prefix] += sum(counts.values())
    assert not stray, (
        "xDSL private fields outside the speed layer (use xDSL's public API or a helper):\n"
        + "\n".join(stray)
    )
    over = {p: (n, CEILING[p]) for p, n in per_prefix.items() if n > CEILING[p]}
    assert not over, f"private-field accesses grew past their ceiling (count, ceiling): {over}"


def test_allowed_paths_exist() -> None:
    for prefix in [*ALLOWED, *CEILING]:
        assert list(ROOT.glob(prefix + "*")), f"stale entry {prefix}"


if __name__ == "__main__":
    for rel, counts in accesses().items():
        kind = "allowed" if _match(rel, ALLOWED) else "ceiling" if _match(rel, CEILING) else "STRAY"
        print(f"{sum(counts.values()):4d}  {kind:8s} {rel}  {dict(sorted(counts.items()))}")
