"""`python -m hlopass.commands.apidoc > docs/PASS_API.md`: the pass author's API reference, generated
from the docstrings of the helpers a pass is written with.

`SECTIONS` groups them (running and registering passes, the pass base classes, building,
matching, replacing, computations and calls, the IR). Every public name defined in
`hlopass.rewriting` appears: one `SECTIONS` does not place lands in a last section, so a
new helper shows up in the reference once it is regenerated (`tests/test_apidoc.py` checks
that the committed file is current). The text is each object's docstring as written, its
signature as declared, and for a dataclass the docstrings under its fields.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import inspect
import pkgutil
import sys
from collections.abc import Sequence
from typing import Any

REWRITING = "hlopass.rewriting"

# (section title, what it is for, [(module, [name, or (class name, [members])])])
Entry = str | tuple[str, list[str]]
SECTIONS: list[tuple[str, str, list[tuple[str, list[Entry]]]]] = [
    (
        "Running, registering and checking passes",
        "A pass is known by its `name` once registered; these run it without an xDSL "
        "`Context` and check that it keeps values.",
        [
            ("hlopass.plugins", ["register_pass", "load_pass_plugin"]),
            ("hlopass.pipeline", ["run_pass", "run_pipeline"]),
            ("hlopass.text.importer", ["parse_hlo"]),
            ("hlopass.text.exporter", ["print_hlo"]),
            ("hlopass.checking.equivalence", ["check_equivalent"]),
            ("hlopass.execution.inputs", ["random_inputs"]),
            ("hlopass.interpreter", ["evaluate"]),
        ],
    ),
    (
        "The pass base classes",
        "A pass subclasses `HloModulePass` (a frozen dataclass: its fields are its options, "
        "each with a docstring) and runs its patterns with `run_patterns` (to a fixed point) "
        "or `expand_in_post_order` (one sweep, as XLA's op expanders).",
        [
            (
                REWRITING,
                [
                    "HloModulePass",
                    "TrackedPass",
                    "RewriteContext",
                    "TraceHook",
                    "run_patterns",
                    "expand_in_post_order",
                    "OpcodeDispatchApplier",
                    "Scope",
                    "NameUniquer",
                    "claim_name",
                    "rewrite_text",
                    "forget_cached_state",
                ],
            )
        ],
    ),
    (
        "Building instructions",
        "Each inserts a new instruction (named `opcode.N`, unique in the module) with the "
        "pattern's rewriter.",
        [
            (
                REWRITING,
                ["new_op", "constant_from_numpy", "scalar_constant", "splat", "insert_computation"],
            )
        ],
    ),
    (
        "Matching",
        "Questions a pattern asks of the values and instructions it looks at.",
        [
            (
                REWRITING,
                [
                    "owner",
                    "const_array",
                    "scalar_int",
                    "gte_index",
                    "splat_value",
                    "is_zero",
                    "is_one",
                    "is_constant_like",
                    "value_shape",
                    "same_shape",
                    "is_root",
                    "is_commutative",
                    "is_hlo",
                    "hlo_class",
                    "hlo_ops",
                    "instructions",
                    "ByClass",
                ],
            )
        ],
    ),
    (
        "What must stay",
        "Instructions a rewrite may not remove or merge.",
        [
            (
                REWRITING,
                [
                    "has_side_effect",
                    "calls_side_effect",
                    "is_removable",
                    "is_random",
                    "is_control_predecessor",
                    "control_predecessor_names",
                ],
            )
        ],
    ),
    (
        "Replacing and erasing",
        "Edits through the pattern's rewriter, so that the driver sees them.",
        [(REWRITING, ["replace_with_new", "replace_op", "erase_dead"])],
    ),
    (
        "Computations and calls",
        "Module-wide questions: which computation is called by what, and from where.",
        [
            (
                REWRITING,
                [
                    "computation_named",
                    "comps_by_name",
                    "module_of",
                    "call_instructions",
                    "call_sites_only",
                    "fusion_computations",
                    "unfused_computations",
                    "reachable_computations",
                    "CallIndex",
                ],
            )
        ],
    ),
    (
        "The IR: instructions, computations, shapes, literals",
        "What patterns read: an instruction (`HloOp`) has `op.opcode`, `op.inst_name`, "
        "`op.shape` (a `Shape`: `ArrayShape` or `TupleShape`), `op.operands`, `op.result` "
        "and its attributes by HLO name (`op.attr(name)`); `computations(module)` lists a "
        "module's computations in order, `entry_computation(module)` is its ENTRY.",
        [
            (
                "hlopass.dialects.hlo",
                [
                    ("HloOp", ["attr", "set_attr", "hlo_attrs"]),
                    ("ComputationOp", ["root", "instructions", "parameters", "block"]),
                    "computations",
                    "entry_computation",
                ],
            ),
            (
                "hlopass.ir.shape",
                [
                    ("ArrayShape", ["leaves", "compatible", "with_dims"]),
                    ("TupleShape", ["leaves"]),
                ],
            ),
            ("hlopass.ir.literal", [("Literal", ["elided", "splat"])]),
        ],
    ),
]


def generate() -> str:
    """The whole reference, as Markdown."""
    lines = [
        "# The pass author's API",
        "",
        "<!-- Generated by `python -m hlopass.commands.apidoc > docs/PASS_API.md` from the "
        "docstrings; edit those, not this file (tests/test_apidoc.py checks it is current). -->",
        "",
        "The helpers a pass is written with, by what they are for. The tutorial "
        "([TUTORIAL.md](TUTORIAL.md)) writes a pass with them; [IR.md](IR.md) "
        "describes the IR.",
        "",
    ]
    placed = {(m, _name(e)) for _, _, groups in SECTIONS for m, es in groups for e in es}
    rest = [n for n in public_names(REWRITING) if (REWRITING, n) not in placed]
    sections = list(SECTIONS)
    if rest:
        sections.append(("Other helpers", "", [(REWRITING, list(rest))]))
    lines += ["## Contents", ""]
    lines += [f"- [{title}](#{_anchor(title)})" for title, _, _ in sections]
    for title, intro, groups in sections:
        lines += ["", f"## {title}", ""]
        if intro:
            lines += [intro, ""]
        for module_name, entries in groups:
            module = importlib.import_module(module_name)
            for entry in entries:
                lines += _entry(module, entry)
    return "\n".join(lines).rstrip() + "\n"


def public_names(module_name: str) -> list[str]:
    """Names a module defines at its top level (functions, classes, assignments) that do
    not start with `_`, in source order; for a package that re-exports its submodules'
    names (`hlopass.rewriting`), its `__all__`."""
    module = importlib.import_module(module_name)
    if hasattr(module, "__all__"):
        return list(module.__all__)
    tree = ast.parse(inspect.getsource(module))
    out: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            out.append(node.name)
        elif isinstance(node, ast.Assign):
            out += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.append(node.target.id)
    return [n for n in dict.fromkeys(out) if not n.startswith("_")]


def doc_of(module: Any, name: str) -> str:
    """The docstring of `module.name`: its own, or for an assignment the string under it."""
    obj = getattr(module, name)
    if inspect.isfunction(obj) or inspect.isclass(obj):
        return inspect.getdoc(obj) or ""
    return _attribute_docs(_defining_module(module, name)).get(name, "")


def _defining_module(package: Any, name: str) -> Any:
    """The submodule of `package` whose source assigns `name` (a re-exported assignment's
    docstring sits under it there), else `package` itself."""
    for info in pkgutil.iter_modules(getattr(package, "__path__", [])):
        sub = importlib.import_module(f"{package.__name__}.{info.name}")
        if name in _attribute_docs(sub):
            return sub
    return package


def _name(entry: Entry) -> str:
    return entry if isinstance(entry, str) else entry[0]


def _anchor(title: str) -> str:
    kept = "".join(c for c in title.lower() if c.isalnum() or c in " -")
    return kept.replace(" ", "-")


def _entry(module: Any, entry: Entry) -> list[str]:
    name = _name(entry)
    obj = getattr(module, name)
    where = f"`{module.__name__}`"
    if inspect.isclass(obj):
        members = entry[1] if not isinstance(entry, str) else own_members(obj)
        return _class(obj, where, members)
    if callable(obj) and not _is_alias(obj):
        head = f"### `{name}{_signature(obj)}`"
    else:
        head = f"### `{name}`"
    doc = doc_of(module, name)
    return [head, "", f"{where}: {doc}" if doc else where, ""]


def _is_alias(obj: Any) -> bool:
    """A type alias (`Callable[[str, str], None]`), not a function to call."""
    return type(obj).__module__ in ("typing", "collections.abc", "types")


def _class(cls: type, where: str, members: Sequence[str]) -> list[str]:
    fields = _fields(cls)
    if dataclasses.is_dataclass(cls):
        sig = _signature(cls) if fields else ""
    else:
        sig = _signature(cls) if "__init__" in cls.__dict__ else ""
    doc = own_doc(cls)
    out = [f"### class `{cls.__name__}{sig}`", "", f"{where}: {doc}" if doc else where, ""]
    for f in fields:
        doc = _field_doc(cls, f.name)
        out.append(f"- field `{f.name}`" + (f": {_one_paragraph(doc)}" if doc else ""))
    named = {f.name for f in fields}
    for m in members:
        if m in named:
            continue
        raw = inspect.getattr_static(cls, m)
        if isinstance(raw, property | functools.cached_property):
            label = f"`{m}` (property)"
            doc = own_doc(raw.fget if isinstance(raw, property) else raw.func)
        else:
            fn = raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw
            label = f"`{m}{_signature(fn, drop_self=not isinstance(raw, staticmethod))}`"
            doc = own_doc(fn)
        out.append(f"- {label}" + (f": {_one_paragraph(doc)}" if doc else ""))
    slots = [s for s in getattr(cls, "__slots__", ()) if not s.startswith("_")]
    if slots and cls.__module__.startswith(REWRITING + "."):
        out.append("- attributes: " + ", ".join(f"`{s}`" for s in slots))
    return out + ([""] if fields or members or slots else [])


def own_members(cls: type) -> list[str]:
    """Public methods and properties `cls` itself defines (its dataclass fields apart)."""
    fields = {f.name for f in _fields(cls)}
    out = []
    for name, raw in cls.__dict__.items():
        if name.startswith("_") or name in fields:
            continue
        kinds = property | staticmethod | classmethod | functools.cached_property
        if inspect.isfunction(raw) or isinstance(raw, kinds):
            out.append(name)
    return out


def own_doc(obj: Any) -> str:
    """`obj`'s own docstring, cleaned ('' for none: not one inherited, nor the text a
    dataclass makes up from its signature)."""
    doc = getattr(obj, "__doc__", None)
    if not isinstance(doc, str):
        return ""
    if (
        inspect.isclass(obj)
        and dataclasses.is_dataclass(obj)
        and doc.startswith(obj.__name__ + "(")
    ):
        return ""
    return inspect.cleandoc(doc)


def _fields(cls: type) -> list[dataclasses.Field[Any]]:
    if not dataclasses.is_dataclass(cls):
        return []
    own = cls.__dict__.get("__annotations__", {})
    return [f for f in dataclasses.fields(cls) if f.name in own]


def _field_doc(cls: type, name: str) -> str:
    from hlopass.driver.pass_options import field_doc

    return field_doc(cls, name)


def _one_paragraph(doc: str) -> str:
    """A docstring inside a list item: its paragraphs joined (Markdown keeps one item)."""
    return " ".join(" ".join(p.split()) for p in doc.split("\n\n"))


def _signature(obj: Any, drop_self: bool = False) -> str:
    """`(a: int, b: str = 'x') -> bool` as declared (the annotations' text, unquoted)."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    params = list(sig.parameters.values())
    if drop_self and params and params[0].name in ("self", "cls"):
        params = params[1:]
    parts = []
    star = False
    for p in params:
        if p.kind is p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        text = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "") + p.name
        star = star or p.kind is p.VAR_POSITIONAL
        if p.annotation is not p.empty:
            text += f": {_annotation(p.annotation)}"
        if p.default is not p.empty:
            text += (
                f" = {_default(p.default)}"
                if p.annotation is not p.empty
                else "=" + _default(p.default)
            )
        parts.append(text)
    out = f"({', '.join(parts)})"
    if sig.return_annotation is not sig.empty and not inspect.isclass(obj):
        out += f" -> {_annotation(sig.return_annotation)}"
    return out


def _annotation(a: Any) -> str:
    return a if isinstance(a, str) else inspect.formatannotation(a)


def _default(value: Any) -> str:
    if value is dataclasses.MISSING:
        return "..."
    text = repr(value)
    # `<factory>` of dataclass fields, or an object's address: nothing stable to show
    return "..." if text.startswith("<") else text


def _attribute_docs(module: Any) -> dict[str, str]:
    """The strings right under the module's top-level assignments, by name."""
    tree = ast.parse(inspect.getsource(module))
    docs: dict[str, str] = {}
    for node, nxt in zip(tree.body, tree.body[1:], strict=False):
        if not (isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)):
            continue
        if not isinstance(nxt.value.value, str):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        for t in targets:
            if isinstance(t, ast.Name):
                docs[t.id] = inspect.cleandoc(nxt.value.value)
    return docs


def main(argv: Sequence[str] | None = None) -> int:
    from hlopass.commands.clirun import OneLineArgumentParser, guard
    from hlopass.commands.output import write_output

    parser = OneLineArgumentParser(
        prog="python -m hlopass.commands.apidoc",
        description="Print the pass author's API reference (docs/PASS_API.md) as Markdown.",
    )
    parser.add_argument("-o", "--output", help="write it to this file (default: stdout)")
    args = parser.parse_args(argv)

    def body() -> int:
        text = generate()
        if args.output:
            write_output(args.output, text.encode())
        else:
            sys.stdout.write(text)
        return 0

    return guard(body, "hlopass.commands.apidoc")


if __name__ == "__main__":
    sys.exit(main())
