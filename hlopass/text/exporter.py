"""xDSL IR -> HLO text (`print_hlo`), reproducing XLA's `HloModule::ToString()`.

Styles: `default` is XLA's default print with large constants in full (untyped operands,
`%` names, program shapes); `long` adds operand shapes (seed 001's style); `short` is
XLA's ShortParsable (no `%`, program shape, metadata or index comments).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from typing import Any

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from hlopass.dialects.hlo import (
    OP_CLASSES,
    ComputationOp,
    HloOp,
    ReturnOp,
    computations,
    on_op_class,
)
from hlopass.dialects.opcodes import (
    ALWAYS_PRINTED,
    COMMON_ATTRS,
    FROM_START,
    METADATA_PRINTED,
    MODULE_ATTRS,
    OMIT_DEFAULT,
    OMIT_EMPTY,
    OMIT_FALSE,
    SUGAR_SHOWN,
    default_compare_type,
)
from hlopass.ir.attrs import format_metadata, format_value
from hlopass.ir.fields import set_field
from hlopass.ir.gcutil import gc_paused
from hlopass.ir.literal import format_literal
from hlopass.ir.shape import Shape, number_elements


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


def _instructions(comp: ComputationOp) -> list[HloOp]:
    """The computation's HloOps in insertion order (a direct walk of the block's op list)."""
    out: list[HloOp] = []
    append = out.append
    op = comp.body.block.first_op
    while op is not None:
        if type(op) in _HLO_CLASSES or (type(op) is not ReturnOp and isinstance(op, HloOp)):
            append(op)  # type: ignore[arg-type]
        op = op._next_op  # pyright: ignore[reportPrivateUsage]
    return out


def instruction_post_order(comp: ComputationOp) -> list[HloOp]:
    """XLA's `MakeInstructionPostOrder`: DFS from each user-less instruction, operands first."""
    insts = _instructions(comp)
    getid = id
    index = dict(zip(map(getid, insts), range(len(insts)), strict=True))
    kids = [[index[getid(v.op)] for v in op._operands] for op in insts]  # pyright: ignore
    preds = [
        (i, op.properties["control-predecessors"].data)  # type: ignore[attr-defined]
        for i, op in enumerate(insts)
        if "control-predecessors" in op.properties
    ]
    return [insts[i] for i in _dfs_post_order(kids, preds, lambda: [o.inst_name for o in insts])]


def _dfs_post_order(
    kids: Sequence[Sequence[int]], preds: Sequence[tuple[int, tuple[str, ...]]], names: Any
) -> list[int]:
    """Indices in XLA's DFS post order, given each instruction's operand indices and the
    control predecessors (by name) of those that have some."""
    n = len(kids)
    if preds:
        by_name = {name: i for i, name in enumerate(names())}
        kids = list(kids)
        for i, ps in preds:
            if ps:
                # Pushed after the operands (the pushes go from last to first), so visited
                # before them.
                kids[i] = [*[by_name[p] for p in reversed(ps)], *kids[i]]
    used = set(chain.from_iterable(kids))
    state = [0] * n  # 0 new, 1 visiting, 2 done
    order: list[int] = []
    append = order.append
    for s in range(n):
        if s in used:
            continue
        stack = [s]
        pop = stack.pop
        extend = stack.extend
        while stack:
            i = stack[-1]
            st = state[i]
            if st:
                pop()
                if st == 1:
                    state[i] = 2
                    append(i)
                continue
            state[i] = 1
            # The first operand on top; done ones are popped again without effect.
            extend(reversed(kids[i]))
    return order


def _is_post_order(kids: Sequence[Sequence[int]]) -> bool:
    """Exactly whether `_dfs_post_order(kids, [])` is the block order 0..n-1, about twice
    as fast as running it (the usual case: XLA printed the module in that order).

    If it is, the DFS visits each instruction i with the instructions before some index
    start[i] done, and emits exactly start[i]..i: the user-less instructions' blocks tile
    0..n-1 in order, and i's operands, in order, that are not done yet (>= the running
    frontier) are first visited from i, each emitting the block from the frontier up to it.
    The start of each instruction is set by its one first visitor (a later instruction) or
    as a root, so one pass from the last instruction back checks all of it."""
    n = len(kids)
    unset = n + 1  # (no start: see `_blocks_tile`)
    start = [unset] * n
    if n:
        # Usually the last instruction is the only user-less one: then a pass that meets
        # no other instruction without a start is exact, with no set of the used ones.
        start[-1] = 0
        if _blocks_tile(kids, start, unset):
            return True
        start = [unset] * n
    used = set(chain.from_iterable(kids))
    if len(used) == n - 1 and n - 1 not in used:
        return False  # the pass above was exact
    cur = 0
    for r in range(n):
        if r not in used:
            start[r] = cur
            cur = r + 1
    return cur == n and _blocks_tile(kids, start, unset)


def _blocks_tile(kids: Sequence[Sequence[int]], start: list[int], unset: int) -> bool:
    """The pass of `_is_post_order`, given the starts of the user-less instructions (the
    others `unset`, a number above every index: an instruction that no later one first
    visits, nor a root, keeps it as its frontier, which no operand reaches, and fails the
    test that the frontier ends at the instruction itself)."""
    i = len(kids)
    for k in reversed(kids):
        i -= 1
        cur = start[i]  # (set by a later instruction, or as a root)
        for o in k:
            if o >= cur:
                if start[o] != unset:
                    return False  # first visited from two instructions
                start[o] = cur
                cur = o + 1
        if cur != i:
            return False
    return True


def _cached_post_order(sc: _Scanned) -> list[int] | None:
    """`_dfs_post_order` of a scanned computation, or None when that is the block order;
    kept on the computation op for the next print as long as the operand indices are the
    same (an equality test of the lists)."""
    if sc.preds:
        return _dfs_post_order(sc.kids, sc.preds, lambda: sc.names)
    comp = sc.comp
    hit = getattr(comp, "_hlo_post_order", None)
    if hit is not None and hit[0] == sc.kids:
        return hit[1]
    order = None if _is_post_order(sc.kids) else _dfs_post_order(sc.kids, sc.preds, None)
    comp._hlo_post_order = (sc.kids, order)  # type: ignore[attr-defined]
    return order


_ALL_BEFORE = [tuple(range(n - 1)) for n in range(1, 33)]
_SECOND = itemgetter(1)
_THIRD = itemgetter(2)
_NUMBER_NAME = itemgetter(0, 1)  # a parameter of a scan by number (then name)


def _in_post_order(
    kids: Sequence[Sequence[int]], preds: Sequence[tuple[int, tuple[str, ...]]]
) -> bool:
    """A cheap sufficient test that `_dfs_post_order` is the identity (block order), for
    the common small computation: only the last instruction has operands, and they are
    exactly every other instruction, in block order (so it is the one user-less
    instruction, and its DFS visits the others in order)."""
    if preds:
        return False
    n = len(kids)
    if not n or n > 32 or kids[-1] != _ALL_BEFORE[n - 1]:
        return False
    return not any(kids[:-1])


def _callees(op: HloOp) -> list[str]:
    names: list[str] = []
    props = op.properties
    for name, kind in _COMP_SPECS[type(op)]:
        a = props.get(name)
        if a is None:
            continue
        if kind == "comp":
            names.append(a.root_reference.data)  # type: ignore[attr-defined]
        elif kind == "comps":
            names.extend(a.data)  # type: ignore[attr-defined]
    if type(op) is _WHILE:
        names.reverse()  # XLA lists a while's body before its condition
    return names


def computation_post_order(module: ModuleOp) -> list[ComputationOp]:
    """XLA's `MakeComputationPostOrder(dfs_postorder=true)`: callees before callers."""
    comps = computations(module)
    called: dict[str, list[list[str]]] = {}
    for c in comps:
        lst: list[list[str]] = []
        for op in _instructions(c):
            if type(op) in _COMP_SPECS:
                names = _callees(op)
                if names:
                    lst.append(names)
        called[c.comp_name] = lst
    return _computation_post_order(comps, called)


def _computation_post_order(
    comps: list[Any],
    called: Mapping[str, Sequence[Sequence[str]]],
    comp_names: list[str] | None = None,
) -> list[Any]:
    """`comps` in XLA's order; `comp_names` are their names (by default their `comp_name`)."""
    if comp_names is None:
        comp_names = [c.comp_name for c in comps]
    by_name = dict(zip(comp_names, comps, strict=True))
    nonroot: set[str] = set()
    for lst in called.values():
        for names in lst:
            nonroot.update(names)
    added: set[str] = set()
    order: list[ComputationOp] = []
    add = added.add
    append = order.append

    def add_embedded(comp: str) -> None:
        # MakeEmbeddedComputationsList (an iterative DFS over the instructions' called
        # computations, callees first) of `comp`, each computation added unless it was:
        # pruning the DFS at added ones keeps the order of the new ones, because an added
        # computation's callees were all added before it.
        for names in called[comp]:
            if len(names) == 1:
                leaf = names[0]
                if not called[leaf]:  # (a reducer, which calls nothing: what the DFS does)
                    if leaf not in added:
                        add(leaf)
                        append(by_name[leaf])
                    continue
            stack: list[tuple[str, int]] = []
            pending: set[str] = set()  # on the stack: visited, not added yet
            for n in reversed(names):
                if n not in added and n not in pending:
                    pending.add(n)
                    stack.append((n, 0))
            while stack:
                name, i = stack[-1]
                lists = called[name]
                if i == len(lists):
                    stack.pop()
                    add(name)
                    append(by_name[name])
                else:
                    stack[-1] = (name, i + 1)
                    for n in reversed(lists[i]):
                        if n not in added and n not in pending:
                            pending.add(n)
                            stack.append((n, 0))

    for c, name in zip(comps, comp_names, strict=True):
        if name in nonroot:
            continue
        if called[name]:
            add_embedded(name)
        add(name)
        append(c)
    return order


_WHILE = OP_CLASSES["while"]
_FUSION = OP_CLASSES["fusion"]
_PARAMETER = OP_CLASSES["parameter"]
_CONSTANT = OP_CLASSES["constant"]
# The op classes built so far (`OP_CLASSES` builds one when first asked for: no op of any
# other class exists), and the computations each of those that calls some may name.
_HLO_CLASSES: set[type] = set()
_COMP_SPECS: dict[type, tuple[tuple[str, str], ...]] = {}
_ASYNC_OPCODES = frozenset(("async-start", "async-update", "async-done"))


def _sugar_reads_back(wrapped: str) -> bool:
    """A computation that is only its parameter (left so by algsimp removing a copy) keeps
    the long form: XLA's printer writes `parameter-start(...)` for it, which no parser reads.
    (`copy-start`, `all-reduce-start`, ... stay XLA's shorthand although they read back as
    the dedicated opcodes: the print is XLA's byte for byte, tests/test_grammar.py.)"""
    return wrapped != "parameter"


# The classes (built so far) of async ops.
_ASYNC_CLASSES: set[type] = set()


def _wrapped_common(start: HloOp, wrapped: HloOp, name: str) -> Any:
    """The wrapped instruction's common attribute `name` as XLA holds it once the chain
    is read: XLA's parser sets an async-update's or -done's frontend_attributes and
    statistics on the wrapped instruction too (the last one read wins), and a start's
    statistics; a start's own frontend_attributes hide the wrapped instruction's."""
    value = wrapped.attr(name)
    if name == "sharding":
        return value
    own = start.attr(name)
    if own is not None:
        if name == "frontend_attributes":
            return None
        value = own
    op = start
    while True:
        uses = list(op.results[0].uses)
        if len(uses) != 1:
            break
        op = uses[0].operation
        if not isinstance(op, HloOp) or op.opcode not in ("async-update", "async-done"):
            break
        later = op.attr(name)
        if later is not None:
            value = later
    return value


# The classes (built so far) scanned for attributes and extras even with no property but
# their name: those with attributes printed even when absent, and async ops
# (async-update/-done without `calls=` still print with their start's sugar).
_SCANNED_CLASSES: set[type] = set()


def _note_op_class(cls: type[HloOp]) -> None:
    """File a newly built op class in the tables above."""
    opcode = cls.OPCODE  # type: ignore[attr-defined]
    if cls.SPEC.computations:  # type: ignore[attr-defined]
        _COMP_SPECS[cls] = tuple((a.name, a.kind) for a in cls.SPEC.computations)  # type: ignore[attr-defined]
    if opcode in _ASYNC_OPCODES:
        _ASYNC_CLASSES.add(cls)
        _SCANNED_CLASSES.add(cls)
    if opcode in ALWAYS_PRINTED:
        _SCANNED_CLASSES.add(cls)
    _HLO_CLASSES.add(cls)


on_op_class(_note_op_class)

# Why an attribute present on an op may still be left out (see `_Printer._omitted`).
_R_DEFAULT, _R_FALSE, _R_EMPTY_DOT, _R_METADATA, _R_BACKEND, _R_CONTROL = 1, 2, 3, 4, 5, 6
_R_PRECISION, _R_COMPARE_TYPE, _R_ALGORITHM, _R_WINDOW = 7, 8, 9, 10


def _rule(opcode: str, name: str) -> int:
    if name in OMIT_DEFAULT:
        return _R_DEFAULT
    if name in OMIT_FALSE:
        return _R_FALSE
    if name in OMIT_EMPTY:
        return _R_EMPTY_DOT if opcode == "dot" else 0
    if name == "metadata":
        return _R_METADATA
    if name == "backend_config":
        return _R_BACKEND
    if name == "control-predecessors":
        return _R_CONTROL
    if name == "operand_precision":
        return _R_PRECISION
    if name == "type" and opcode == "compare":
        return _R_COMPARE_TYPE
    if name == "algorithm" and opcode in ("dot", "scaled-dot"):
        return _R_ALGORITHM
    if name == "window":
        return _R_WINDOW
    return 0


_PERCENT_KINDS = frozenset(("comp", "comps", "names"))


def _text_key(kind: str, percent: bool) -> str:
    """Where an attribute caches its printed text (per kind, and per `%` style if it matters)."""
    return "_hlo_text_" + kind + ("" if percent or kind not in _PERCENT_KINDS else "_nopct")


def _attr_text(a: Any, kind: str, percent: bool, key: str | None = None) -> str:
    """`format_value` of an attribute's value, cached on the (immutable) attribute under
    `key` (by default `_text_key(kind, percent)`)."""
    if key is None:
        key = _text_key(kind, percent)
    t = getattr(a, key, None)
    if t is None:
        value = a.root_reference.data if kind == "comp" else a.data
        t = format_value(kind, value, percent)  # (a literal's array is read-only)
        set_field(a, key, t)
    return t


def _indexed_shape(shape: Shape, layout: bool = True) -> str:
    """A shape with `/*index=N*/` every 5 tuple elements (ShapeUtil::PrintHumanString)."""
    if shape.is_tuple:
        parts = [_indexed_shape(e, layout) for e in shape.elements]  # type: ignore[attr-defined]
        return "(" + ", ".join(number_elements(parts)) + ")"
    return shape.text(layout)


def _type_text(t: Any) -> str:
    """`_indexed_shape` of a ShapeType's shape, cached on the (immutable) type attribute."""
    s = getattr(t, "_hlo_text", None)
    if s is None:
        s = _indexed_shape(t.data)
        set_field(t, "_hlo_text", s)
    return s


def _type_text_no_layout(t: Any) -> str:
    s = getattr(t, "_hlo_text_nl", None)
    if s is None:
        s = _indexed_shape(t.data, False)
        set_field(t, "_hlo_text_nl", s)
    return s


def _async_callee(op: Any) -> str | None:
    """The computation an async op runs (update/done without `calls=`: that of their start)."""
    for _ in range(10000):
        c = op.attr("calls")
        if c is not None or not op.operands:
            return c
        op = op.operands[0].owner
        if type(op) not in _ASYNC_CLASSES:
            return None
    return None


def _split_call(text: str, opcode: str) -> tuple[str, str]:
    """`name = shape opcode(args)` and the `, attr=...` rest of an instruction's text."""
    i = text.index(" " + opcode + "(") + len(opcode) + 2
    depth = 1
    n = len(text)
    while i < n and depth:
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        i += 1
    return text[:i], text[i:]


def _fusion_bodies(scans: list[Any]) -> set[str]:
    """Names of the computations fusion instructions call."""
    out: set[str] = set()
    for sc in scans:
        if sc.called:
            for op in _instructions(sc.comp):
                if type(op) is _FUSION:
                    out.add(op.properties["calls"].root_reference.data)  # type: ignore[attr-defined]
    return out


def _tiny_text(comp: ComputationOp, cname: str, pct: str, program_shape: bool) -> str | None:
    """The whole text of a computation of the form of most reducers, or None when it has
    another: one or two parameters (with no attribute but their number), then its ROOT,
    an instruction with no attribute whose operands are those parameters in block order
    (so block order is XLA's post order). It skips `scan`'s bookkeeping and the post-order
    test: 3809 of Mixtral 8x7B's 4002 computations have this form, and its print runs 7%
    fewer instructions (callgrind) with them taking this path. The text is one f-string
    (no lists of lines, no joins): these computations were a fifth of a warm print."""
    p0 = comp.regions[0]._first_block._first_op  # type: ignore[union-attr]  # pyright: ignore
    if type(p0) is not _PARAMETER or len(p0.properties) != 2:  # type: ignore[union-attr]
        return None
    op = p0._next_op  # type: ignore[union-attr]  # pyright: ignore[reportPrivateUsage]
    p1 = None
    if type(op) is _PARAMETER and len(op.properties) == 2:  # type: ignore[union-attr]
        p1 = op
        op = op._next_op  # type: ignore[union-attr]  # pyright: ignore[reportPrivateUsage]
    if op is None:
        return None
    cls = type(op)
    if cls not in _HLO_CLASSES or cls in _SCANNED_CLASSES or len(op.properties) != 1:
        return None
    ret = op._next_op  # pyright: ignore[reportPrivateUsage]
    if type(ret) is not ReturnOp or ret._next_op is not None:  # pyright: ignore[reportPrivateUsage]
        return None
    res = op.results[0]  # (`Results` indexes in C; unpacking one is slower)
    if ret._operands != (res,):  # pyright: ignore[reportPrivateUsage]
        return None
    r0 = p0.results[0]  # type: ignore[union-attr]
    props = p0.properties  # type: ignore[union-attr]
    n0 = props["name"].data  # type: ignore[attr-defined]
    k0 = props["number"].data  # type: ignore[attr-defined]
    # (Any: `_hlo_text` and `_hlo_text_nl`, cached on a type, are fields xDSL does not declare)
    t0: Any = r0._type  # pyright: ignore[reportPrivateUsage]
    rt: Any = res._type  # pyright: ignore[reportPrivateUsage]
    try:  # (the types' cached texts, usually there: see `_type_text`)
        tt0 = t0._hlo_text
        tt = rt._hlo_text
    except AttributeError:
        tt0 = _type_text(t0)
        tt = _type_text(rt)
    name = op.properties["name"].data  # type: ignore[attr-defined]
    if program_shape:
        try:
            nl0 = t0._hlo_text_nl
            rtt = rt._hlo_text_nl
        except AttributeError:
            nl0 = _type_text_no_layout(t0)
            rtt = _type_text_no_layout(rt)
    if p1 is None:
        if op._operands != (r0,):  # pyright: ignore[reportPrivateUsage]
            return None
        body = (
            f"{pct}{n0} = {tt0} parameter({k0})\n"
            f"  ROOT {pct}{name} = {tt} {cls.OPCODE}({pct}{n0})"  # type: ignore[attr-defined]
        )
        sig = f"{n0}: {nl0}" if program_shape else ""
    else:
        r1 = p1.results[0]
        if op._operands != (r0, r1):  # pyright: ignore[reportPrivateUsage]
            return None
        props = p1.properties
        n1 = props["name"].data  # type: ignore[attr-defined]
        k1 = props["number"].data  # type: ignore[attr-defined]
        t1: Any = r1._type  # pyright: ignore[reportPrivateUsage]
        try:
            tt1 = t1._hlo_text
        except AttributeError:
            tt1 = _type_text(t1)
        body = (
            f"{pct}{n0} = {tt0} parameter({k0})\n  {pct}{n1} = {tt1} parameter({k1})\n"
            f"  ROOT {pct}{name} = {tt} {cls.OPCODE}({pct}{n0}, {pct}{n1})"  # type: ignore[attr-defined]
        )
        sig = ""
        if program_shape:  # the parameters by number (then text), as `computation` sorts
            s0 = f"{n0}: {nl0}"
            s1 = f"{n1}: {_type_text_no_layout(t1)}"
            sig = f"{s0}, {s1}" if k0 < k1 or (k0 == k1 and s0 <= s1) else f"{s1}, {s0}"
    if program_shape:
        return f"{pct}{cname} ({sig}) -> {rtt} {{\n  {body}\n}}"
    return f"{pct}{cname} {{\n  {body}\n}}"


class _Scanned:
    """One computation's instructions as text, with what ordering them needs (the rarer
    parts default to empty tuples, replaced by lists when the scan finds some)."""

    root = -1
    root_type: Any = None
    thread: Any = None  # the execution_thread attribute
    params: Sequence[tuple[int, str, Any]] = ()  # (number, `name: shape`, its ShapeType)
    called: Sequence[list[str]] = ()
    asyncs: Sequence[tuple[int, Any]] = ()  # (index, async-start/update/done op)
    preds: Sequence[tuple[int, tuple[str, ...]]] = ()
    text: str | None = None  # the whole computation's text, when `_tiny_text` made it
    # (`whole` scans: no instructions)
    texts: list[str] = []  # noqa: RUF012 (never appended to: `scan` gives each its own)
    kids: list[Sequence[int]] = []  # noqa: RUF012
    names: list[str] = []  # noqa: RUF012

    def __init__(
        self, comp: ComputationOp, name: str, texts: list[str], kids: list[Any], names: list[str]
    ) -> None:
        self.comp = comp
        self.name = name
        self.texts = texts
        # Operand indices per instruction (for the post order).
        self.kids: list[Sequence[int]] = kids
        self.names = names  # instruction names (without `%`)

    @classmethod
    def whole(cls, comp: ComputationOp, name: str, text: str) -> _Scanned:
        """The scan of a computation printed as one text (`_tiny_text`): no instruction
        texts, nothing for the ordering (one `__new__` and three stores, no lists: most
        computations of a large module take this)."""
        sc = cls.__new__(cls)
        sc.comp = comp
        sc.name = name
        sc.text = text
        return sc

    def add(self, part: str, item: Any) -> None:
        """Append to one of the rarer parts."""
        lst = getattr(self, part)
        if lst.__class__ is not list:  # (the class's empty tuple)
            lst = []
            setattr(self, part, lst)
        lst.append(item)


# One unit on purpose: the print hot path (benchmarks/io_bench.py, first print).
class _Printer:
    def __init__(self, options: PrintOptions):
        self.o = options
        self.pct = "%" if options.percent else ""
        interval = options.index_interval
        # Operand counts above `general` take the general path (shapes, `/*index=N*/`).
        general = 0 if options.operand_shapes else min(2, interval) if interval else 2
        self._scan_options = (
            self.pct,
            general,
            interval,
            options.operand_shapes,
            options.program_shape,
        )
        # Attribute suffixes ("" when left out) are cached per the options that decide that.
        self._sfx_tag = "_%d%d%d" % (
            options.metadata,
            options.backend_config,
            options.control_dependencies,
        )
        # Where a metadata attribute caches its `, metadata={...}` (as `_plan_of` names it).
        self._metadata_key = self._suffix_key("metadata", _text_key("metadata", options.percent))
        # Small computations of one shape (a reducer's) take `_tiny_text` (not with
        # operand shapes, which it does not print).
        self._tiny = not options.operand_shapes
        # Per (op class, *property names): `_plan_of`.
        self._plan_by_names: dict[tuple[Any, ...], tuple[bool | str, tuple[Any, ...]]] = {}

    def module(self, module: ModuleOp) -> str:
        out: list[str] = []
        name = module.attributes.get("sym_name")
        header = "HloModule " + (name.data if name is not None else "module")  # type: ignore[attr-defined]
        scan = self.scan
        all_scans = [scan(c) for c in computations(module)]
        names = [sc.name for sc in all_scans]
        scans: list[_Scanned] = _computation_post_order(
            all_scans, {sc.name: sc.called for sc in all_scans}, names
        )
        if any(sc.asyncs for sc in all_scans):
            hidden = self._async_sugar(all_scans)
            if hidden:
                scans = [sc for sc in scans if sc.name not in hidden]
        entry_sc = next((sc for sc in scans if "is_entry" in sc.comp.properties), scans[-1])
        entry = entry_sc.comp
        for key, kind in MODULE_ATTRS.items():
            attr = module.attributes.get("hlo." + key)
            if key == "entry_computation_layout":
                header += ", entry_computation_layout=" + self.program_shape_layout(
                    attr.data if attr is not None else None,  # type: ignore[attr-defined]
                    entry,
                    entry_sc,
                )
                continue
            if attr is None:
                continue
            value = attr.data  # type: ignore[attr-defined]
            if kind == "bool" and not value:
                continue
            header += f", {key}={format_value(kind, value)}"
        out.append(header)
        tables = module.attributes.get("hlo.stack_frames")
        if tables is not None:
            out.append(str(tables.data) + "\n")  # type: ignore[attr-defined]
        scheduled = module.attributes.get("hlo.is_scheduled")
        is_scheduled = bool(scheduled is not None and scheduled.data)  # type: ignore[attr-defined]
        computation = self.computation
        # XLA's parser schedules every computation but fusion bodies in text order; those
        # print in post order like an unscheduled module's.
        fused = _fusion_bodies(scans) if is_scheduled else set()
        # The text is `"\n  ".join(items)`, one join over every instruction's text: no
        # string per computation copied again into the module's (a large computation's is
        # megabytes of fresh memory, page faults included). `out` holds the blocks
        # (separated by blank lines) since the last item: see `computation`.
        items: list[str] = []
        for sc in scans:
            out = computation(sc, sc is entry_sc, is_scheduled and sc.name not in fused, out, items)
        out.append("")
        items.append("\n\n".join(out))
        return "\n  ".join(items)

    def _async_sugar(self, all_scans: list[_Scanned]) -> set[str]:
        """XLA's async shorthand: an async op whose computation is one instruction (besides
        parameters) prints as `X-start/-update/-done`, and that computation is not printed.
        Rewrites the texts of those ops; returns the names of the computations to hide."""
        by_name = {sc.name: sc for sc in all_scans}
        single: dict[str, bool] = {}
        hidden: set[str] = set()
        for sc in all_scans:
            for n, op in sc.asyncs:
                cname = _async_callee(op)
                w = by_name.get(cname) if cname is not None else None
                if w is None:
                    continue
                ok = single.get(cname)  # type: ignore[arg-type]
                if ok is None:
                    root = w.comp.root
                    ok = single[cname] = _sugar_reads_back(root.opcode) and all(  # type: ignore[index]
                        i is root or i.opcode == "parameter" for i in w.comp.instructions
                    )
                if ok:
                    hidden.add(cname)  # type: ignore[arg-type]
                    sc.texts[n] = self._sugar_text(sc.texts[n], op, cname, w)  # type: ignore[arg-type]
        return hidden

    def _sugar_text(self, text: str, op: HloOp, cname: str, w: _Scanned) -> str:
        opcode = op.opcode
        wrapped = w.comp.root
        head, rest = _split_call(text, opcode)
        head = head.replace(" " + opcode + "(", f" {wrapped.opcode}-{opcode[6:]}(", 1)
        thread = ""
        t = op.attr("async_execution_thread")
        if t is not None:
            ts = ", async_execution_thread=" + format_value("str", t)
            if rest.startswith(ts):
                rest = rest[len(ts) :]
                thread = ts
        cs = ", calls=" + self.pct + cname
        if rest.startswith(cs):
            rest = rest[len(cs) :]
        if opcode != "async-start":
            return head + rest
        wattrs = _split_call(w.texts[w.root], wrapped.opcode)[1] if w.root >= 0 else ""
        for a in COMMON_ATTRS:  # cut the wrapped instruction's common attributes ...
            if a.name in wrapped.properties:
                cut = wattrs.find(", " + a.name + "=")
                if cut >= 0:
                    wattrs = wattrs[:cut]
                break
        for name in SUGAR_SHOWN:  # ... but XLA shows these three of them
            value = _wrapped_common(op, wrapped, name)
            if value is not None:
                wattrs += f", {name}={format_value('raw', value)}"
        return head + thread + wattrs + rest

    def program_shape_layout(
        self, stored: tuple[Shape, ...] | None, entry: ComputationOp, sc: _Scanned | None = None
    ) -> str:
        """`{(params)->result}` of the entry computation: as stored, or from its
        parameters (those its scan `sc` noted, when the style notes them) and its ROOT."""
        if stored is not None:
            params = [s.text() for s in stored[:-1]]
            result = _indexed_shape(stored[-1])
        elif sc is not None and self.o.program_shape and sc.root_type is not None:
            # (the types' printed texts, which the parser may have given them: an array's
            # is its shape's text; a tuple's numbers its elements, which a parameter's
            # text here does not)
            params = [
                t.data.text() if t.data.is_tuple else _type_text(t)
                for t in map(_THIRD, sorted(sc.params, key=_NUMBER_NAME))
            ]
            result = _type_text(sc.root_type)
        else:
            params = [p.shape.text() for p in entry.parameters()]
            result = _indexed_shape(entry.root.shape)
        return "{(" + ", ".join(number_elements(params)) + ")->" + result + "}"

    def indexed_shape(self, shape: Shape) -> str:
        return _indexed_shape(shape)

    def shape_no_layout(self, shape: Shape) -> str:
        return _indexed_shape(shape, False)

    def computation(
        self, sc: _Scanned, is_entry: bool, scheduled: bool, blocks: list[str], items: list[str]
    ) -> list[str]:
        """Add a computation to the module's text: `items` are joined with a newline and
        two spaces (an instruction's indentation); `blocks`, the text since the last item,
        with a blank line between blocks. A computation without instruction texts is one
        more block; otherwise its first instruction closes the blocks into an item, the
        others are items, and its last (with the closing brace) starts the next blocks,
        which this returns."""
        if sc.text is not None:
            blocks.append(sc.text)
            return blocks
        comp = sc.comp
        head = ("ENTRY " if is_entry else "") + self.pct + sc.name + " "
        if self.o.program_shape:
            params = sc.params
            if len(params) > 1:
                params.sort(key=_NUMBER_NAME)  # type: ignore[attr-defined]  # (a list once it has two)
            sig = ", ".join(map(_SECOND, params))
            rt = sc.root_type
            if rt is None:
                rt = comp.root.results[0].type
            rtt = _type_text_no_layout(rt)
            head = f"{head}({sig}) -> {rtt} "
        texts = sc.texts
        root = sc.root
        if not (scheduled or _in_post_order(sc.kids, sc.preds)):
            order = _cached_post_order(sc)
            if order is not None:
                texts = list(map(texts.__getitem__, order))
                root = order.index(root) if root >= 0 else -1
        if root >= 0:
            texts[root] = "ROOT " + texts[root]  # sc is scratch of this print
        thread = sc.thread
        if thread is not None and thread.data != "main":  # type: ignore[attr-defined]
            tail = f'}}, execution_thread="{thread.data}"'  # type: ignore[attr-defined]
        else:
            tail = "}"
        if not texts:
            blocks.append(head + "{\n" + tail)
            return blocks
        blocks.append(head + "{")
        items.append("\n\n".join(blocks))
        items.extend(texts)
        return [items.pop() + "\n" + tail]

    # One function on purpose: the per-instruction print hot path (benchmarks/io_bench.py).
    def scan(self, comp: ComputationOp) -> _Scanned:
        """Walk the computation once: each instruction's text (without indentation or
        ROOT), operand indices (for the post order), parameters, called computations."""
        cprops = comp.properties
        if len(cprops) == 1 and self._tiny:  # (only its name: not the entry, no thread)
            cname = cprops["sym_name"].data  # type: ignore[attr-defined]
            text = _tiny_text(comp, cname, self.pct, self.o.program_shape)
            if text is not None:
                return _Scanned.whole(comp, cname, text)
        texts: list[str] = []
        kids: list[Any] = []
        names: list[str] = []
        sc = _Scanned(comp, cprops["sym_name"].data, texts, kids, names)  # type: ignore[attr-defined]
        thread = cprops.get("execution_thread")
        if thread is not None:
            sc.thread = thread
        params: list[tuple[int, str, Any]] | None = None
        called: list[list[str]] | None = None
        pct, general, interval, operand_shapes, want_params = self._scan_options
        psep = ", " + pct
        # Each result gets `_pi`, its index in this scan; `vals[_pi] is value` tells a
        # current index from one left by an earlier scan (or another thread's), and an
        # operand defined later in the block fails it too.
        vals: list[Any] = []
        add_val = vals.append
        add_name = names.append
        add_text = texts.append
        add_kids = kids.append
        hlo_classes = _HLO_CLASSES
        plans = self._plan_by_names
        always_classes = _SCANNED_CLASSES
        md_key = self._metadata_key
        n = -1
        # (`Region.block`, which checks there is one block, costs ~1% on many tiny
        # computations; a computation has one block.)
        op = comp.regions[0]._first_block._first_op  # type: ignore[union-attr]  # pyright: ignore
        while op is not None:
            cls = type(op)
            if cls not in hlo_classes:
                if cls is ReturnOp:
                    for v in op._operands:  # pyright: ignore[reportPrivateUsage]
                        j = getattr(v, "_pi", -1)
                        sc.root = j if 0 <= j <= n and vals[j] is v else -1
                        sc.root_type = v._type  # pyright: ignore[reportPrivateUsage]
                    op = op._next_op  # pyright: ignore[reportPrivateUsage]
                    continue
                if not isinstance(op, HloOp):
                    op = op._next_op  # pyright: ignore[reportPrivateUsage]
                    continue
            n += 1
            props: dict[str, Any] = op.properties
            name = props["name"].data
            add_name(name)  # (no `pct + name` string per instruction: the f-strings add it)
            res = op.results[0]  # (an instruction has one; `Results` indexes in C)
            add_val(res)
            res._pi = n  # type: ignore[attr-defined]
            t: Any = res._type  # pyright: ignore[reportPrivateUsage]  # (Any: see `_hlo_text`)
            try:
                tt = t._hlo_text  # cached by `_type_text`
            except AttributeError:
                tt = _type_text(t)
            operands: Any = op._operands  # pyright: ignore[reportPrivateUsage]  # (values carry `_pi`)
            no = len(operands)
            nprops = len(props)  # less those printed as the operand (number, value)
            if no > general:
                try:
                    k = [v._pi for v in operands]
                    if tuple(map(vals.__getitem__, k)) != operands:
                        raise IndexError
                    opnames = list(map(names.__getitem__, k))
                except (AttributeError, IndexError):  # an operand defined later in the block
                    k = self._operand_indices(op, comp, vals)
                    opnames = [
                        self._operand_name(v, j, vals, names)
                        for v, j in zip(operands, k, strict=True)
                    ]
                if operand_shapes:
                    for i, v in enumerate(operands):
                        vt = v._type  # pyright: ignore[reportPrivateUsage]
                        opnames[i] = f"{_type_text(vt)} {pct}{opnames[i]}"
                    args = ", ".join(number_elements(opnames, interval) if interval else opnames)
                elif interval and no > interval:  # (`/*index=N*/` goes before the `%`)
                    args = ", ".join(number_elements([pct + x for x in opnames], interval))
                else:  # (no string per operand)
                    args = pct + psep.join(opnames)
                add_kids(k)
                text = f"{pct}{name} = {tt} {cls.OPCODE}({args})"  # type: ignore[attr-defined]
            elif no == 2:
                v0, v1 = operands
                try:
                    j0 = v0._pi
                    j1 = v1._pi
                    if vals[j0] is not v0 or vals[j1] is not v1:
                        raise IndexError
                    text = f"{pct}{name} = {tt} {cls.OPCODE}({pct}{names[j0]}, {pct}{names[j1]})"  # type: ignore[attr-defined]
                except (AttributeError, IndexError):  # an operand defined later in the block
                    j0, j1 = self._operand_indices(op, comp, vals)
                    a0 = self._operand_name(v0, j0, vals, names)
                    args = f"{pct}{a0}, {pct}{self._operand_name(v1, j1, vals, names)}"
                    text = f"{pct}{name} = {tt} {cls.OPCODE}({args})"  # type: ignore[attr-defined]
                add_kids((j0, j1))
            elif no == 1:
                (v0,) = operands  # (SSAValues.__getitem__ is Python code)
                try:
                    j0 = v0._pi
                    if vals[j0] is not v0:
                        raise IndexError
                    text = f"{pct}{name} = {tt} {cls.OPCODE}({pct}{names[j0]})"  # type: ignore[attr-defined]
                except (AttributeError, IndexError):  # an operand defined later in the block
                    (j0,) = self._operand_indices(op, comp, vals)
                    args = self._operand_name(v0, j0, vals, names)
                    text = f"{pct}{name} = {tt} {cls.OPCODE}({pct}{args})"  # type: ignore[attr-defined]
                add_kids((j0,))
            else:
                add_kids(())
                if cls is _PARAMETER:
                    number = props["number"].data
                    text = f"{pct}{name} = {tt} parameter({number})"
                    nprops -= 1
                    if want_params:
                        try:
                            ttn = t._hlo_text_nl
                        except AttributeError:
                            ttn = _type_text_no_layout(t)
                        if params is None:
                            params = sc.params = []
                        params.append((number, f"{name}: {ttn}", t))
                elif cls is _CONSTANT:
                    va = props["value"]
                    lt = getattr(va, "_hlo_literal", None)
                    if lt is None:  # (a literal's array is read-only: see `Literal`)
                        v = va.data
                        lt = format_literal(v.literal, v.shape)
                        set_field(va, "_hlo_literal", lt)
                    text = f"{pct}{name} = {tt} constant({lt})"
                    nprops -= 1
                else:
                    text = f"{pct}{name} = {tt} {cls.OPCODE}()"  # type: ignore[attr-defined]
            if nprops > 1 or cls in always_classes:
                if nprops == 2:
                    a = props.get("metadata")
                    if a is not None and cls not in always_classes:
                        # A name and metadata alone (most instructions of a module with
                        # metadata): no plan to look up.
                        at = getattr(a, md_key, None)
                        if at is None:
                            at = self._metadata_suffix(a.data)
                            set_field(a, md_key, at)
                        add_text(text + at)
                        op = op._next_op  # pyright: ignore[reportPrivateUsage]
                        continue
                key = (cls, *props)
                extras, plan = plans.get(key) or self._plan_of(cls, props, key)
                if extras.__class__ is str:  # the one computation it calls (reduce's to_apply)
                    ref = props[extras]  # type: ignore[index]
                    if called is None:
                        called = sc.called = []
                    called.append([ref.root_reference.data])
                elif extras:
                    self._scan_extras(sc, n, op, cls, props)  # type: ignore[arg-type]
                    called = sc.called or None  # type: ignore[assignment]  # (a list, if it started one)
                for aname, kind, rule, always, tkey, skey in plan:
                    a = props.get(aname)
                    if a is None:  # in the plan only when printed even when absent
                        text += f", {aname}={always}"
                        continue
                    # `, name=text`, or "" when left out: cached on the (immutable) attribute.
                    at = getattr(a, skey, None)
                    if at is None:
                        if kind == "comp" and not rule:  # (no `_suffix` call: one per reducer)
                            at = f", {aname}={pct}{a.root_reference.data}"
                            set_field(a, skey, at)
                        elif rule == _R_METADATA:  # (one per op_name: most of a first print)
                            at = self._metadata_suffix(a.data)
                            set_field(a, skey, at)
                        else:
                            at = self._suffix(op, aname, kind, rule, a, tkey, skey)  # type: ignore[arg-type]
                    text += at
            add_text(text)
            op = op._next_op  # pyright: ignore[reportPrivateUsage]
        return sc

    def _scan_extras(
        self, sc: _Scanned, n: int, op: HloOp, cls: type, props: dict[str, Any]
    ) -> None:
        """Note what instruction n (`op`) adds to the rarer parts of its scan: called
        computations, async ops, control predecessors."""
        if cls in _COMP_SPECS:
            called = _callees(op)
            if called:
                sc.add("called", called)
            if cls in _ASYNC_CLASSES:
                sc.add("asyncs", (n, op))
        cp = props.get("control-predecessors")
        if cp is not None:
            sc.add("preds", (n, cp.data))

    def _metadata_suffix(self, md: Any) -> str:
        """`_suffix` of a metadata attribute: `, metadata={...}`, or "" when it shows none
        of the fields XLA prints (or the style prints no metadata)."""
        if self.o.metadata:
            fields = md.fields
            if len(fields) == 2 and fields[0][0] == "op_type" and fields[1][0] == "op_name":
                # the common pair, in XLA's order, in one step (most of a first print's
                # metadata: one per op_name)
                return f", metadata={{op_type={fields[0][1]} op_name={fields[1][1]}}}"
            for k, _ in fields:
                if k in METADATA_PRINTED:
                    return ", metadata=" + format_metadata(md)
        return ""

    def _suffix(
        self, op: HloOp, name: str, kind: str, rule: int, a: Any, key: str, skey: str
    ) -> str:
        """`, name=text` of one attribute, or "" when XLA leaves it out; cached on the
        attribute under `skey` unless it depends on more than the attribute's value."""
        if rule and self._omitted(op, rule, name, a):
            at = ""
        else:
            at = ", " + name + "=" + _attr_text(a, kind, self.o.percent, key)
        if rule != _R_COMPARE_TYPE:  # (compare's default type depends on the operand type)
            set_field(a, skey, at)
        return at

    def _suffix_key(self, name: str, text_key: str) -> str:
        """Where an attribute printed as `name` caches its `, name=text` suffix, given the
        key of its text (`_text_key`)."""
        return "_hlo_sfx_" + name + text_key + self._sfx_tag

    def _plan_of(
        self, cls: type, props: dict[str, Any], names: tuple[Any, ...]
    ) -> tuple[bool | str, tuple[tuple[str, str, int, str | None, str, str], ...]]:
        """Whether an op may call computations or have control predecessors (see
        `_scan_extras`; the name of the attribute naming the one computation it calls, when
        that is all it adds: `scan` notes it itself), and the attributes to print, in XLA's order: those it has and those
        printed even when absent, as (name, kind, omission rule, text printed when absent,
        text cache key, cache key of the `, name=text` suffix). Cached per op class and
        property names."""
        opcode = cls.OPCODE  # type: ignore[attr-defined]
        always = ALWAYS_PRINTED.get(opcode, {})
        plan = []
        for spec in cls.ATTR_SPECS.values():  # type: ignore[attr-defined]  # in print order
            name, kind = spec.name, spec.kind
            if name in ("number", "value") or (name not in props and name not in always):
                continue
            if name in FROM_START and opcode in ("async-update", "async-done"):
                continue  # XLA prints these on the async-start only
            key = _text_key(kind, self.o.percent)
            skey = self._suffix_key(name, key)
            plan.append((name, kind, _rule(opcode, name), always.get(name), key, skey))
        extras: bool | str = cls in _COMP_SPECS or "control-predecessors" in props
        specs = _COMP_SPECS.get(cls, ())
        if (
            len(specs) == 1
            and specs[0][1] == "comp"
            and specs[0][0] in props
            and cls is not _WHILE
            and cls not in _ASYNC_CLASSES
            and "control-predecessors" not in props
        ):
            extras = specs[0][0]
        entry = (extras, tuple(plan))
        self._plan_by_names[names] = entry
        return entry

    def _operand_indices(self, op: Operation, comp: ComputationOp, vals: list[Any]) -> list[int]:
        """Operand indices of `op` (their position among the computation's instructions),
        also when some operand is defined later in the block."""
        try:
            k = [v._pi for v in op._operands]  # type: ignore[attr-defined]  # pyright: ignore
            if all(vals[j] is v for v, j in zip(op._operands, k, strict=True)):  # pyright: ignore[reportPrivateUsage]
                return k
        except (AttributeError, IndexError):
            pass
        index = {id(x.results[0]): i for i, x in enumerate(_instructions(comp))}
        try:
            return [index[id(v)] for v in op._operands]  # pyright: ignore[reportPrivateUsage]
        except KeyError:
            raise ValueError(
                f"{op.inst_name}: an operand is not an instruction of computation "  # type: ignore[attr-defined]
                f"{comp.comp_name}"
            ) from None

    def _operand_name(self, v: Any, j: int, vals: list[Any], names: list[str]) -> str:
        """An operand's name (without `%`), also when it is not the instruction `j`."""
        if j < len(vals) and vals[j] is v:
            return names[j]
        return v.op.properties["name"].data

    def _omitted(self, op: HloOp, rule: int, name: str, a: Any) -> bool:
        value = a.data
        if rule == _R_METADATA:
            if self.o.metadata:
                for k, _ in value.fields:
                    if k in METADATA_PRINTED:
                        return False
            return True
        if rule == _R_DEFAULT:
            return value == OMIT_DEFAULT[name]
        if rule in (_R_FALSE, _R_EMPTY_DOT):
            return not value
        if rule == _R_BACKEND:
            return not self.o.backend_config or value == ""
        if rule == _R_CONTROL:
            return not self.o.control_dependencies or not value
        if rule == _R_PRECISION:
            return not any(p != "default" for p in value)
        if rule == _R_COMPARE_TYPE:
            et = op._operands[0].type.data.element_type  # type: ignore[attr-defined]  # pyright: ignore
            return value == default_compare_type(et)
        if rule == _R_ALGORITHM:
            return value in ("unset", "alg_unset")
        if rule == _R_WINDOW:
            return not value.dims
        return False


# One printer per style, shared by all prints (and threads): its plans depend only on the
# options and the op classes, and building them again for every print cost ~3% of it.
_PRINTERS: dict[str, _Printer] = {}


def print_hlo(module: ModuleOp, style: str = "default") -> str:
    """HLO text of `module`; `default` matches XLA's `to_string()` with large constants."""
    printer = _PRINTERS.get(style)
    if printer is None:
        printer = _PRINTERS[style] = _Printer(PrintOptions.of(style))
    # The print allocates many short-lived, acyclic containers (freed by reference
    # counting); with the collector on, they trigger collections that traverse the whole
    # module (~10% of the print time on large modules).
    with gc_paused():
        return printer.module(module)
