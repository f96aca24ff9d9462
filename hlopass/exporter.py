"""xDSL IR -> HLO text (`print_hlo`), reproducing XLA's `HloModule::ToString()`.

Styles: `default` is XLA's default print with large constants in full (untyped operands,
`%` names, program shapes); `long` adds operand shapes (seed 001's style); `short` is
XLA's ShortParsable (no `%`, program shape, metadata or index comments).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from hlopass.attrs import format_value
from hlopass.dialects.hlo import ComputationOp, HloOp, computations
from hlopass.importer import MODULE_ATTRS
from hlopass.literal import format_literal
from hlopass.shape import Shape


@dataclass(frozen=True)
class PrintOptions:
    percent: bool = True
    operand_shapes: bool = False
    program_shape: bool = True
    metadata: bool = True
    backend_config: bool = True
    index_interval: int = 5
    control_dependencies: bool = True

    @staticmethod
    def of(style: str) -> PrintOptions:
        if style == "default":
            return PrintOptions()
        if style == "long":
            return PrintOptions(operand_shapes=True)
        if style == "short":
            return PrintOptions(
                percent=False,
                program_shape=False,
                metadata=False,
                backend_config=False,
                index_interval=0,
                control_dependencies=False,
            )
        raise ValueError(f"unknown print style {style!r}; use default, long or short")


# Attributes printed only when they differ from XLA's default value.
_OMIT_DEFAULT: dict[str, Any] = {
    "feature_group_count": 1,
    "batch_group_count": 1,
    "api_version": "API_VERSION_ORIGINAL",
    "schedule": "SCHEDULE_NONE",
    "algorithm_dot": "unset",
}

_DEFAULT_COMPARE_TYPE = {"pred": "UNSIGNED"}

# Attributes XLA prints even when the text left them out, with the value it prints.
_ALWAYS_PRINTED: dict[str, dict[str, str]] = {
    "dot": {"lhs_contracting_dims": "{}", "rhs_contracting_dims": "{}"},
    "all-gather": {"replica_groups": "{}"},
    "all-gather-start": {"replica_groups": "{}"},
    "all-to-all": {"replica_groups": "{}"},
    "all-reduce": {"replica_groups": "{}"},
    "all-reduce-start": {"replica_groups": "{}"},
    "reduce-scatter": {"replica_groups": "{}"},
}
# Attributes left out when false / empty.
_OMIT_FALSE = frozenset({"unique_indices", "indices_are_sorted", "is_stable"})
_OMIT_EMPTY = frozenset({"lhs_batch_dims", "rhs_batch_dims"})


def _default_compare_type(element_type: str) -> str:
    if element_type in ("pred",) or element_type.startswith("u"):
        return "UNSIGNED"
    if element_type.startswith("s"):
        return "SIGNED"
    return "FLOAT"


def instruction_post_order(comp: ComputationOp) -> list[HloOp]:
    """XLA's `MakeInstructionPostOrder`: DFS from each user-less instruction, operands first."""
    insts = list(comp.instructions)
    index = {id(op): i for i, op in enumerate(insts)}
    by_name = None
    state = [0] * len(insts)  # 0 new, 1 visiting, 2 done
    order: list[HloOp] = []
    for start in insts:
        if any(isinstance(u.operation, HloOp) for u in start.results[0].uses):
            continue
        stack = [start]
        while stack:
            cur = stack[-1]
            i = index[id(cur)]
            s = state[i]
            if s == 0:
                state[i] = 1
            else:
                stack.pop()
                if s == 1:
                    state[i] = 2
                    order.append(cur)
                continue
            for operand in reversed(cur.operands):
                o = operand.owner
                if state[index[id(o)]] != 2:
                    stack.append(o)  # type: ignore[arg-type]
            preds = cur.attr("control-predecessors")
            if preds:
                if by_name is None:
                    by_name = {op.inst_name: op for op in insts}
                for p in preds:
                    o = by_name[p]
                    if state[index[id(o)]] != 2:
                        stack.append(o)
    return order


def computation_post_order(module: ModuleOp) -> list[ComputationOp]:
    """XLA's `MakeComputationPostOrder(dfs_postorder=true)`: callees before callers."""
    comps = computations(module)
    by_name = {c.comp_name: c for c in comps}
    called: dict[str, list[str]] = {}
    nonroot: set[str] = set()
    for c in comps:
        lst: list[str] = []
        for op in c.instructions:
            names = op.callees()
            if op.opcode == "while":
                names.reverse()  # XLA lists a while's body before its condition
            if names:
                lst.append(names)  # type: ignore[arg-type]
                nonroot.update(names)
        called[c.comp_name] = lst  # type: ignore[assignment]
    added: set[str] = set()
    order: list[ComputationOp] = []

    def embedded(comp: str) -> list[str]:
        # MakeEmbeddedComputationsList: iterative DFS over instructions' called computations.
        visited: set[str] = set()
        post: list[str] = []
        for names in called[comp]:
            stack: list[tuple[str, int]] = []
            for n in reversed(names):  # type: ignore[call-overload]
                if n not in visited:
                    visited.add(n)
                    stack.append((n, 0))
            while stack:
                name, i = stack[-1]
                lists = called[name]
                if i == len(lists):
                    stack.pop()
                    post.append(name)
                else:
                    stack[-1] = (name, i + 1)
                    for n in reversed(lists[i]):  # type: ignore[call-overload]
                        if n not in visited:
                            visited.add(n)
                            stack.append((n, 0))
        return post

    for c in comps:
        if c.comp_name in nonroot:
            continue
        for e in embedded(c.comp_name):
            if e not in added:
                added.add(e)
                order.append(by_name[e])
        added.add(c.comp_name)
        order.append(c)
    return order


class _Printer:
    def __init__(self, options: PrintOptions):
        self.o = options
        self.pct = "%" if options.percent else ""

    def module(self, module: ModuleOp) -> str:
        out: list[str] = []
        name = module.attributes.get("sym_name")
        header = "HloModule " + (name.data if name is not None else "module")  # type: ignore[attr-defined]
        comps = computation_post_order(module)
        entry = next((c for c in comps if c.is_entry is not None), comps[-1])
        for key, kind in MODULE_ATTRS.items():
            attr = module.attributes.get("hlo." + key)
            if key == "entry_computation_layout":
                header += ", entry_computation_layout=" + self.program_shape_layout(
                    attr.data if attr is not None else None, entry  # type: ignore[attr-defined]
                )
                continue
            if attr is None:
                continue
            value = attr.data  # type: ignore[attr-defined]
            if kind == "bool" and not value:
                continue
            header += f", {key}={format_value(kind, value)}"
        out.append(header)
        out.append("")
        tables = module.attributes.get("hlo.stack_frames")
        if tables is not None:
            out.append(str(tables.data))  # type: ignore[attr-defined]
            out.append("")
            out.append("")
        scheduled = module.attributes.get("hlo.is_scheduled")
        is_scheduled = bool(scheduled is not None and scheduled.data)  # type: ignore[attr-defined]
        for c in comps:
            out.append(self.computation(c, c is entry, is_scheduled))
            out.append("")
        return "\n".join(out) + "\n"

    def program_shape_layout(self, stored: tuple[Shape, ...] | None, entry: ComputationOp) -> str:
        if stored is not None:
            params, result = list(stored[:-1]), stored[-1]
        else:
            params = [p.shape for p in entry.parameters()]
            result = entry.root.shape
        texts = []
        for i, s in enumerate(params):
            prefix = f"/*index={i}*/" if i and i % 5 == 0 else ""
            texts.append(prefix + s.text())
        return "{(" + ", ".join(texts) + ")->" + self.indexed_shape(result) + "}"

    def indexed_shape(self, shape: Shape) -> str:
        """A shape with `/*index=N*/` every 5 tuple elements (ShapeUtil::PrintHumanString)."""
        if shape.is_tuple:
            parts = []
            for i, e in enumerate(shape.elements):  # type: ignore[attr-defined]
                prefix = f"/*index={i}*/" if i and i % 5 == 0 else ""
                parts.append(prefix + self.indexed_shape(e))
            return "(" + ", ".join(parts) + ")"
        return shape.text()

    def computation(self, comp: ComputationOp, is_entry: bool, scheduled: bool) -> str:
        head = ("ENTRY " if is_entry else "") + self.pct + comp.comp_name + " "
        if self.o.program_shape:
            params = comp.parameters()
            sig = ", ".join(f"{p.inst_name}: {self.shape_no_layout(p.shape)}" for p in params)
            head += f"({sig}) -> {self.shape_no_layout(comp.root.shape)} "
        lines = [head + "{"]
        root = comp.root
        order = list(comp.instructions) if scheduled else instruction_post_order(comp)
        for op in order:
            lines.append(("  ROOT " if op is root else "  ") + self.instruction(op))
        tail = "}"
        thread = comp.execution_thread
        if thread is not None and thread.data != "main":
            tail += f', execution_thread="{thread.data}"'
        lines.append(tail)
        return "\n".join(lines)

    def shape_no_layout(self, shape: Shape) -> str:
        if shape.is_tuple:
            parts = []
            for i, e in enumerate(shape.elements):  # type: ignore[attr-defined]
                prefix = f"/*index={i}*/" if i and i % 5 == 0 else ""
                parts.append(prefix + self.shape_no_layout(e))
            return "(" + ", ".join(parts) + ")"
        return shape.text(False)

    def instruction(self, op: HloOp) -> str:
        pct = self.pct
        opcode = op.opcode
        shape = op.shape
        shape_text = self.indexed_shape(shape) if shape.is_tuple else shape.text()
        text = f"{pct}{op.inst_name} = {shape_text} {opcode}("
        if opcode == "parameter":
            text += str(op.attr("number")) + ")"
        elif opcode == "constant":
            v = op.attr("value")
            text += format_literal(v.literal, v.shape) + ")"
        else:
            parts = []
            interval = self.o.index_interval
            for i, operand in enumerate(op.operands):
                owner: HloOp = operand.owner  # type: ignore[assignment]
                prefix = f"/*index={i}*/" if interval and i and i % interval == 0 else ""
                if self.o.operand_shapes:
                    prefix += self.indexed_shape(owner.shape) + " "
                parts.append(prefix + pct + owner.inst_name)
            text += ", ".join(parts) + ")"
        attrs = []
        always = _ALWAYS_PRINTED.get(opcode)
        present = op.properties
        for spec in op.attr_specs.values():
            name = spec.name
            if name in ("number", "value"):
                continue
            if name not in present:
                if always is not None and name in always:
                    attrs.append(f"{name}={always[name]}")
                continue
            value = op.attr(name)
            if not self._should_print(op, name, value):
                continue
            attrs.append(f"{name}={format_value(spec.kind, value, self.o.percent)}")
        if attrs:
            text += ", " + ", ".join(attrs)
        return text

    def _should_print(self, op: HloOp, name: str, value: Any) -> bool:
        if name in _OMIT_DEFAULT and value == _OMIT_DEFAULT[name]:
            return False
        if name in _OMIT_FALSE and not value:
            return False
        if name in _OMIT_EMPTY and not value and op.opcode == "dot":
            return False
        if name == "metadata":
            # XLA prints metadata only when one of these four fields is set.
            return self.o.metadata and any(
                k in ("op_type", "op_name", "source_file", "scheduling_name")
                for k, _ in value.fields
            )
        if name == "backend_config":
            return self.o.backend_config and value != ""
        if name == "control-predecessors":
            return self.o.control_dependencies and bool(value)
        if name == "operand_precision":
            return any(p != "default" for p in value)
        if name == "type" and op.opcode == "compare":
            et = op.operands[0].type.data.element_type  # type: ignore[attr-defined]
            return value != _default_compare_type(et)
        if name == "algorithm" and op.opcode in ("dot", "scaled-dot"):
            return value not in ("unset", "alg_unset")
        if name == "window":
            return bool(value.dims)
        return True


def print_hlo(module: ModuleOp, style: str = "default") -> str:
    """HLO text of `module`; `default` matches XLA's `to_string()` with large constants."""
    return _Printer(PrintOptions.of(style)).module(module)
