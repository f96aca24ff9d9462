"""Shared helpers for passes written as xDSL pattern rewrites over the `hlo` dialect.

* `HloModulePass`: an xDSL `ModulePass` whose `run` reports whether it changed the module
  (XLA's `Run -> changed`); `apply` is the xDSL entry point and calls `run`.
* `NameUniquer`: fresh instruction names in XLA's `name.N` style, unique in the module.
* `RewriteContext`: what patterns of one pass run share (the uniquer, a trace hook).
* `new_op`, `constant_from_numpy`, `replace_op`, `erase_dead`: building and replacing
  instructions with a `PatternRewriter`.
* Matching helpers: `const_array`, `splat_value`, `is_zero`, `is_one`, `owner`.
"""

from __future__ import annotations

import functools
import re
import sys
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeGuard

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    RewritePattern,
)
from xdsl.rewriter import InsertPoint
from xdsl.traits import Commutative

from hlopass.dialects.hlo import (
    ComputationOp,
    HasSideEffect,
    HloOp,
    RandomNumber,
    ReturnOp,
    computations,
    create_op,
    entry_computation,
    op_list,
)
from hlopass.ir.attrs import ShapedLiteral
from hlopass.ir.literal import Literal, numpy_dtype
from hlopass.ir.shape import ArrayShape, Shape, TupleShape, scalar

if TYPE_CHECKING:
    from hlopass.driver.worklist import Touches, WalkResult

# --- passes -------------------------------------------------------------------------------


@dataclass(frozen=True)
class HloModulePass(ModulePass):
    """A module pass over HLO that reports whether it changed the module.

    Every subclass's `run` is wrapped so that, once it returns, state derived from the
    module and cached elsewhere (the interpreter `hlopass.evaluate` keeps per module) is
    dropped: a pass may have edited a computation that cache has already walked.
    """

    name: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in ("run", "run_scoped"):
            run = cls.__dict__.get(name)
            if run is not None and not getattr(run, "_forgets_caches", False):
                setattr(cls, name, _forgetting_caches(run))

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        """Transform `module` in place; True when it changed."""
        raise NotImplementedError

    def run_scoped(self, ctx: Context, module: ModuleOp, scope: Scope,
                   trace: TraceHook | None = None) -> bool:  # fmt: skip
        """`run`, visiting only `scope.only` and noting in `scope` what changed.

        This default runs on the whole module and, when it changed, reports every
        computation as changed: a pass that tracks its changes overrides it."""
        changed = self.run(ctx, module, trace)
        scope.everything |= changed
        return changed

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """xDSL's entry point (`xdsl-opt -p NAME`): `run` on the module (on each inner
        module where `op` wraps several), its changed flag dropped."""
        # xdsl-opt wraps several top-level modules (`hlopass-opt --split-input-file --emit
        # xdsl` output read without --split-input-file) in an outer module: each inner one
        # is an HLO module of its own, and the outer one has no computations to rewrite.
        inner = [o for o in op.body.ops if isinstance(o, ModuleOp)]
        for module in inner or [op]:
            self.run(ctx, module)


def _forgetting_caches(run: Callable[..., bool]) -> Callable[..., bool]:
    @functools.wraps(run)
    def wrapped(self: HloModulePass, ctx: Context, module: ModuleOp, *args: Any) -> bool:
        try:
            return run(self, ctx, module, *args)
        finally:
            forget_cached_state(module)

    wrapped._forgets_caches = True  # type: ignore[attr-defined]
    return wrapped


def forget_cached_state(module: ModuleOp) -> None:
    """Drop what other parts of hlopass cached about `module` (after it was edited).

    Today: the interpreter `hlopass.interpreter.interpreter_for(module)` keeps, whose
    computation table and per-computation schedules go stale when a pass edits the module.
    """
    module.__dict__.pop(_PINNED, None)
    module.__dict__.pop(_EFFECTS, None)
    core = sys.modules.get("hlopass.interpreter.core")  # never imported just for this
    if core is not None:
        core.forget(module)


TraceHook = Callable[[str, str], None]
"""Called as `trace(pattern_name, description)` after each rewrite."""


@dataclass
class Scope:
    """Where one pass run works, and what it reports having changed: the fixpoint's
    per-computation dirty tracking (a pass reruns only where something changed since)."""

    only: set[ComputationOp] | None = None
    """Visit only these computations (None: every one)."""

    changed: set[ComputationOp] = field(default_factory=set)
    """Computations the run edited: instructions added, removed, or changed."""

    everything: bool = False
    """The run may have changed any computation (it does not say which)."""

    settled: set[ComputationOp] = field(default_factory=set)
    """Computations the run left at its own fixed point: its last walk over one changed
    nothing, and nothing else it reads changed after (its walk to a fixed point and
    nothing module-wide): running it again there would change nothing."""

    tracked: bool = False
    """The run reported its changes in `changed` and `touched` (set by passes that track
    them; a run that changed the module without doing so counts as having changed
    everything)."""

    seeds: dict[ComputationOp, Touches] = field(default_factory=dict)
    """For a computation of `only` listed here: the instructions something changed since
    the pass's last run there (or that depend on a changed callee); the run may start
    from them instead of the whole computation (`hlopass.driver.worklist`)."""

    touched: dict[ComputationOp, Touches] = field(default_factory=dict)
    """Computations the run edited only through a tracking rewriter, with the instructions
    it touched (created, modified, whose uses changed). A computation also in `changed`
    counts as changed as a whole."""

    exhaustive: bool = False
    """Walk whole computations (no seeds, whole-computation confirming walks): the slow
    reference the shortcuts of `hlopass.driver.worklist` are tested against."""

    index: dict[ComputationOp, CallIndex] | None = None
    """The fixpoint's per-computation call index, current when the run starts (None: scan
    the module): a run's module-wide questions (which computations are fused, called,
    reachable, which instructions are pinned) then cost a look per computation, not a
    scan of every instruction."""

    def select(self, comps: Iterable[ComputationOp]) -> list[ComputationOp]:
        """`comps` this run visits, in order."""
        only = self.only
        return list(comps) if only is None else [c for c in comps if c in only]

    def seeds_of(self, comp: ComputationOp) -> Touches | None:
        """Where the run may start in `comp` (None: everywhere)."""
        return None if self.exhaustive else self.seeds.get(comp)

    def record(self, comp: ComputationOp, walk: WalkResult) -> bool:
        """Note what a tracking walk over `comp` did; whether it changed anything."""
        if walk.changed:
            have = self.touched.get(comp)
            if have is None:
                self.touched[comp] = walk.touched
            else:
                have.update(walk.touched)
        return walk.changed

    def edited(self) -> set[ComputationOp]:
        """Every computation the run edited, whichever way."""
        return self.changed | self.touched.keys()


# --- names --------------------------------------------------------------------------------

_SUFFIX = re.compile(r"^(.*?)\.(\d+)$")


class NameUniquer:
    """Unique instruction names in XLA's style: `prefix`, then `prefix.1`, `prefix.2`, ...

    The module's names are collected on the first `fresh` call, not up front: most pass
    runs of a fixpoint pipeline create nothing, and the walk costs one visit per instruction.
    """

    def __init__(self, module: ModuleOp | None = None):
        self._module = module
        self._used: set[str] | None = None if module is not None else set()
        self.next: dict[str, int] = {}

    @property
    def used(self) -> set[str]:
        """Every name taken: the module's instruction names and those `fresh` gave."""
        if self._used is None:
            assert self._module is not None
            used: set[str] = set()
            add = used.add
            for comp in computations(self._module):
                # the `name` property itself (the return has none); one walk down the op
                # chain, not `op_list` and a second pass over its list
                op = comp.block._first_op  # pyright: ignore[reportPrivateUsage]
                while op is not None:
                    p = op.properties
                    if "name" in p:
                        add(p["name"].data)  # type: ignore[attr-defined]
                    op = op._next_op  # pyright: ignore[reportPrivateUsage]
            self._used = used
            self._module = None
        return self._used

    def fresh(self, base: str) -> str:
        """A name not yet used, taken now: `base` without its `.N` suffix if free, else
        that root with the lowest free `.N` (`add.3` may give `add`, `add.1`, ...)."""
        used = self.used
        m = _SUFFIX.match(base)
        root = m.group(1) if m else base
        if root not in used:
            used.add(root)
            return root
        n = self.next.get(root, 1)
        while f"{root}.{n}" in used:
            n += 1
        self.next[root] = n + 1
        name = f"{root}.{n}"
        used.add(name)
        return name


@dataclass
class RewriteContext:
    """State shared by the patterns of one pass run."""

    module: ModuleOp
    """The module the pass runs on."""
    names: NameUniquer
    """Fresh instruction names for what the patterns create (`new_op` takes them here)."""
    trace: TraceHook | None = None
    """Told of each rewrite (`note`); None when nobody listens."""
    float_op_memo: list[Any] = field(default_factory=lambda: [None, None, False])
    """algsimp's float-unsafe guard, kept for the instruction visit it was computed for."""

    @functools.cached_property
    def pinned(self) -> frozenset[str]:
        """`control_predecessor_names(module)`: fixed for the run, asked per pattern."""
        return control_predecessor_names(self.module)

    @staticmethod
    def of(module: ModuleOp, trace: TraceHook | None = None,
           scope: Scope | None = None) -> RewriteContext:  # fmt: skip
        """The context for one run of a pass over `module`: a fresh `NameUniquer`, the
        `trace` hook (`--trace-rewrites`), what `scope`'s call index already knows."""
        module.__dict__.pop(_PINNED, None)  # recomputed for this run
        module.__dict__.pop(_EFFECTS, None)
        index = scope.index if scope is not None else None
        if index is not None:
            comps = computations(module)
            if all(c in index for c in comps):
                setattr(module, _PINNED, frozenset().union(*(index[c].pinned for c in comps)))
        return RewriteContext(module, NameUniquer(module), trace)

    def note(self, pattern: object, op: HloOp | None, what: str = "") -> None:
        """Tell the trace hook, if any, that `pattern` rewrites `op` (`what`: a few words on
        how); `--trace-rewrites` shows the pattern's docstring's first line as the rule."""
        if self.trace is not None:
            label = op.inst_name if op is not None else ""
            name = type(pattern).__name__
            if name not in _REWRITE_TEXT:
                _REWRITE_TEXT[name] = _first_doc_line(type(pattern))
            self.trace(name, f"{label} {what}".strip())


_REWRITE_TEXT: dict[str, str] = {}


def _first_doc_line(cls: type) -> str:
    doc = (cls.__doc__ or "").strip()
    return doc.splitlines()[0].rstrip(".").replace("`", "") if doc else ""


def rewrite_text(pattern_name: str) -> str:
    """The rewrite a traced pattern performs (its docstring's first line, e.g.
    `add(x, 0) -> x`), or '' for a pattern not yet traced or without a docstring."""
    return _REWRITE_TEXT.get(pattern_name, "")


# --- building and replacing ---------------------------------------------------------------


_HLO_CLASS: dict[type, bool] = {}
"""op class -> whether it is an `HloOp`: `isinstance` against xDSL's abstract op classes
goes through `ABCMeta.__instancecheck__`, several times slower than this lookup, and is
asked for every operand a pattern looks at."""


def is_hlo(o: object) -> TypeGuard[HloOp]:
    """`isinstance(o, HloOp)`, quickly."""
    t = type(o)
    found = _HLO_CLASS.get(t)
    if found is None:
        found = _HLO_CLASS[t] = issubclass(t, HloOp)
    return found


class ByClass:
    """A test of ops answered once per op class: `self(op)` is `test(type(op))`, and
    `self.ops(ops)` keeps the ops that pass, in order. The drivers filter whole
    computations with it: a look-up per instruction, not a Python call (Mixtral's fixpoint
    pipeline filters ~200k instructions)."""

    __slots__ = ("answers", "test")

    def __init__(self, test: Callable[[type], bool], answers: dict[type, bool] | None = None):
        self.test = test
        self.answers: dict[type, bool] = {} if answers is None else answers

    def __call__(self, op: Operation) -> bool:
        t = type(op)
        found = self.answers.get(t)
        if found is None:
            found = self.answers[t] = self.test(t)
        return found

    def ops(self, ops: list[Operation]) -> list[Operation]:
        """The ops of `ops` that pass the test, in order (one test per new class)."""
        answers = self.answers
        for t in set(map(type, ops)).difference(answers):
            answers[t] = self.test(t)
        return [op for op in ops if answers[type(op)]]


def hlo_class(t: type) -> bool:
    """Whether `t` is an `HloOp` class (`is_hlo` of its instances)."""
    found = _HLO_CLASS.get(t)
    if found is None:
        found = _HLO_CLASS[t] = issubclass(t, HloOp)
    return found


hlo_ops = ByClass(hlo_class, _HLO_CLASS).ops
"""The HLO instructions of a list of ops (`is_hlo`), in order."""


def instructions(comp: ComputationOp) -> list[HloOp]:
    """`comp.instructions` as a list, without `isinstance`'s cost per op (the module-wide
    scans of a pass run, e.g. for fused computations, look at every instruction)."""
    known = _HLO_CLASS
    out = []
    for o in op_list(comp.block):
        t = type(o)
        found = known.get(t)
        if found is None:
            found = known[t] = issubclass(t, HloOp)
        if found:
            out.append(o)
    return out


def owner(value: SSAValue) -> HloOp | None:
    """`value`'s defining instruction (None for a block argument or a non-HLO op); asked
    for every operand a pattern looks at, so `is_hlo` is inlined, and a result's `op`
    field is read without `owner`'s property call."""
    try:
        o = value.op  # type: ignore[attr-defined]
    except AttributeError:  # a block argument
        o = value.owner
    t = type(o)
    found = _HLO_CLASS.get(t)
    if found is None:
        found = _HLO_CLASS[t] = issubclass(t, HloOp)
    return o if found else None  # type: ignore[return-value]


def new_op(
    rewriter: PatternRewriter,
    ctx: RewriteContext,
    opcode: str,
    operands: Sequence[SSAValue],
    shape: Shape,
    attrs: dict[str, Any] | None = None,
    like: HloOp | None = None,
    before: Operation | None = None,
) -> HloOp:
    """Create and insert an instruction named `opcode.N` (metadata copied from `like`)."""
    a = dict(attrs or {})
    if like is not None:
        md = like.attr("metadata")
        if md is not None and "metadata" not in a:
            a["metadata"] = md
    op = create_op(opcode, list(operands), shape, ctx.names.fresh(opcode), a)
    rewriter.insert(op, InsertPoint.before(before) if before is not None else None)
    return op


def constant_from_numpy(
    rewriter: PatternRewriter,
    ctx: RewriteContext,
    value: np.ndarray | float | int | bool,
    shape: ArrayShape,
    before: Operation | None = None,
    name: str = "constant",
) -> HloOp:
    """Insert `constant` of `shape` holding `value` (converted to the element type)."""
    arr = np.asarray(value).astype(numpy_dtype(shape.element_type))
    arr = np.broadcast_to(arr, shape.dims).copy() if arr.shape != shape.dims else arr
    op = create_op(
        "constant", [], shape, ctx.names.fresh(name),
        {"value": ShapedLiteral(shape, Literal(arr))},
    )  # fmt: skip
    rewriter.insert(op, InsertPoint.before(before) if before is not None else None)
    return op


def scalar_constant(
    rewriter: PatternRewriter, ctx: RewriteContext, value: object, element_type: str,
    before: Operation | None = None,
) -> HloOp:  # fmt: skip
    """Insert a scalar `constant` of `element_type` holding `value` (`constant`, or
    `constant.N` where that name is taken)."""
    return constant_from_numpy(rewriter, ctx, np.asarray(value), scalar(element_type), before)


def splat(
    rewriter: PatternRewriter, ctx: RewriteContext, value: object, shape: ArrayShape,
    like: HloOp | None = None,
) -> HloOp:  # fmt: skip
    """`broadcast(constant(value))` of `shape` (just the constant for a scalar shape)."""
    c = scalar_constant(rewriter, ctx, value, shape.element_type)
    if not shape.dims:
        return c
    return new_op(rewriter, ctx, "broadcast", [c.result], shape, {"dimensions": ()}, like)


def is_removable(op: Operation) -> bool:
    """Pure (or a removable impure opcode), not a parameter, without side effects in it
    or in any computation it calls: safe to delete once unused."""
    if not is_hlo(op):
        return False
    if not (
        op.opcode != "parameter"
        and not has_side_effect(op)
        and (op.spec.traits & {"pure"} or op.opcode in _REMOVABLE_IMPURE)
    ):
        return False
    if is_control_predecessor(op):
        return False
    if not op.callees():
        return True
    module = module_of(op)
    if module is None:
        return True
    memo = module.__dict__.setdefault(_EFFECTS, {})
    return not calls_side_effect(op, _ModuleComps(module), memo=memo)


_EFFECTS = "_hlopass_side_effect_memo"
"""The module's attribute holding `is_removable`'s answers per called computation (cached
until a pass ends, as `_PINNED`: no pass adds a side effect)."""


_PINNED = "_hlopass_control_predecessor_names"
"""The module's attribute caching `control_predecessor_names` (asked for each instruction a
pattern looks at: an attribute read is several times cheaper than a weak-dictionary one)."""


def control_predecessor_names(module: ModuleOp) -> frozenset[str]:
    """Instructions named in some `control-predecessors={...}` (cached until a pass ends)."""
    names = module.__dict__.get(_PINNED)
    if names is None:
        found: set[str] = set()
        for comp in computations(module):
            for op in instructions(comp):
                preds = op.attr("control-predecessors")
                if preds:
                    found.update(preds)
        names = frozenset(found)
        setattr(module, _PINNED, names)
    return names


def is_control_predecessor(op: HloOp) -> bool:
    """Some instruction lists `op` as a control predecessor: it must not disappear."""
    module = module_of(op)
    return module is not None and op.inst_name in control_predecessor_names(module)


class _ModuleComps(Mapping[str, ComputationOp]):
    """`comps_by_name(module)` read through `computation_named` (no walk per question)."""

    def __init__(self, module: ModuleOp):
        self.module = module

    def __getitem__(self, name: str) -> ComputationOp:
        c = computation_named(self.module, name)
        if c is None:
            raise KeyError(name)
        return c

    def __iter__(self) -> Iterator[str]:
        return iter(comps_by_name(self.module))

    def __len__(self) -> int:
        return len(computations(self.module))


def calls_side_effect(
    op: HloOp, comps: Mapping[str, ComputationOp], seen: set[str] | None = None,
    random: bool = False, memo: dict[tuple[str, bool], bool] | None = None,
) -> bool:  # fmt: skip
    """XLA's `HasSideEffect`: `op` or anything in the computations it calls (recursively)
    has a side effect; with `random`, random-number instructions count too. With `memo`
    (kept by the caller for one pass run), each computation's answer is worked out once:
    a pass asks for every `reduce`, and most of them call the same few reducers."""
    if has_side_effect(op) or (random and is_random(op)):
        return True
    if memo is not None:
        return any(_computation_effect(name, comps, random, memo) for name in op.callees())
    seen = set() if seen is None else seen
    for name in op.callees():
        if name in seen:
            continue
        seen.add(name)
        comp = comps.get(name)
        if comp is None:
            return True  # unknown callee: assume the worst
        for inner in instructions(comp):
            if calls_side_effect(inner, comps, seen, random):
                return True
    return False


def _computation_effect(
    name: str, comps: Mapping[str, ComputationOp], random: bool,
    memo: dict[tuple[str, bool], bool],
) -> bool:  # fmt: skip
    """Something in computation `name` (or what it calls) has a side effect (an unknown
    computation is assumed to); `memo` holds the answers found so far."""
    key = (name, random)
    found = memo.get(key)
    if found is not None:
        return found
    memo[key] = False  # a call cycle (invalid HLO) adds nothing new, as `seen` above
    comp = comps.get(name)
    found = comp is None or any(
        calls_side_effect(inner, comps, None, random, memo) for inner in instructions(comp)
    )
    memo[key] = found
    return found


_REMOVABLE_IMPURE = frozenset({"replica-id", "partition-id", "custom-call"})
"""Not marked pure, but removable when unused and without side effects (XLA's HloDCE)."""


_CLASS_TRAITS: dict[tuple[type, type], bool] = {}
"""(op class, trait class) -> whether the class has the trait: traits belong to the class,
and xDSL's `has_trait` scans the class's list with `isinstance` on every call."""


def _class_has(op: Operation, trait: type) -> bool:
    key = (type(op), trait)
    found = _CLASS_TRAITS.get(key)
    if found is None:
        found = _CLASS_TRAITS[key] = op.has_trait(trait)
    return found


def has_side_effect(op: HloOp) -> bool:
    """XLA's `HasSideEffectNoRecurse`, from the traits and custom-call's flag."""
    if _class_has(op, HasSideEffect):
        return True
    if op.opcode == "custom-call":
        return bool(op.attr("custom_call_has_side_effect"))
    return False


def is_random(op: HloOp) -> bool:
    """`op` draws random numbers (`rng`): CSE must not merge two, folding must not run one."""
    return _class_has(op, RandomNumber)


def is_commutative(op: Operation) -> bool:
    """`op.has_trait(Commutative)`, from the class's cached answer."""
    return _class_has(op, Commutative)


def erase_dead(rewriter: PatternRewriter, values: Iterable[SSAValue]) -> None:
    """Erase the owners of `values` that became unused, and recursively their operands."""
    stack = [v.owner for v in values]
    while stack:
        op = stack.pop()
        if (
            is_hlo(op)
            and op.parent is not None
            and op.result.first_use is None
            and is_removable(op)
        ):
            operands = list(op.operands)
            rewriter.erase(op)
            stack.extend(v.owner for v in operands)


def replace_op(rewriter: PatternRewriter, op: HloOp, value: SSAValue) -> None:
    """Replace every use of `op` with `value`, erase it, then its operands left unused."""
    operands = list(op.operands)
    rewriter.replace_all_uses_with(op.result, value)
    rewriter.erase(op)
    erase_dead(rewriter, operands)


def replace_with_new(
    rewriter: PatternRewriter,
    ctx: RewriteContext,
    op: HloOp,
    opcode: str,
    operands: Sequence[SSAValue],
    shape: Shape | None = None,
    attrs: dict[str, Any] | None = None,
) -> HloOp:
    """XLA's `ReplaceWithNewInstruction`: a new `opcode.N` instruction takes `op`'s place."""
    new = new_op(rewriter, ctx, opcode, operands, shape or op.shape, attrs, like=op, before=op)
    replace_op(rewriter, op, new.result)
    return new


class OpcodeDispatchApplier(RewritePattern):
    """xDSL's `GreedyRewritePatternApplier` (patterns tried in order until one acts, no
    DCE), offering an instruction only to the patterns that can match its opcode.

    A pattern whose class has a non-empty `OPCODES` tuple promises that its
    `match_and_rewrite` does nothing to any other operation (algsimp's `Simplification`
    checks that first); every other pattern is offered everything. The result is the same
    as trying all of them, without calling a hundred patterns per instruction.
    """

    def __init__(self, patterns: Sequence[RewritePattern]):
        self.patterns = list(patterns)
        self._by_opcode: dict[str | None, list[RewritePattern]] = {}
        self._wanted = ByClass(self._wants_class)
        """Whether some pattern may match an op's instructions (`wants`)."""

    def _for(self, opcode: str | None) -> list[RewritePattern]:
        found = self._by_opcode.get(opcode)
        if found is None:
            found = self._by_opcode[opcode] = self._select(opcode)
        return found

    def _select(self, opcode: str | None) -> list[RewritePattern]:
        """The patterns an instruction of `opcode` is offered, in order (asked once per
        opcode; a subclass may build its patterns here, on first need)."""
        return [
            p
            for p in self.patterns
            if not getattr(type(p), "OPCODES", ()) or opcode in type(p).OPCODES  # type: ignore[attr-defined]
        ]

    def wants(self, op: Operation) -> bool:
        """Some pattern may match `op` (the driver does not visit the others); asked of
        every instruction a walk starts from, so answered per op class."""
        return self._wanted(op)

    def select(self, ops: list[Operation]) -> list[Operation]:
        """`[op for op in ops if self.wants(op)]`, a test per op class."""
        return self._wanted.ops(ops)

    def _wants_class(self, t: type) -> bool:
        return bool(self._for(t.OPCODE if hlo_class(t) else None))  # type: ignore[attr-defined]

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        """Offer `op` to the patterns for its opcode, in order, until one acts on it."""
        for pattern in self._for(op.OPCODE if is_hlo(op) else None):  # type: ignore[attr-defined]
            pattern.match_and_rewrite(op, rewriter)
            if rewriter.has_done_action:
                return


_COMPS: weakref.WeakKeyDictionary[ModuleOp, dict[str, ComputationOp]] = weakref.WeakKeyDictionary()
"""Per module: computations by name, as last seen (checked on every hit, see below)."""


def computation_named(module: ModuleOp, name: str) -> ComputationOp | None:
    """The computation of `module` called `name` (None when there is none).

    The table is rebuilt only when a hit is stale (the computation left the module or was
    renamed) or on a miss, so passes that add, drop or rename computations still get the
    truth, and a pass asking once per instruction does not walk the module each time.
    """
    table = _COMPS.get(module)
    if table is not None:
        c = table.get(name)
        # (the module's block without the IRDL accessors: asked per reduce a pattern reads)
        if c is not None and c.parent is module.regions[0]._first_block and c.comp_name == name:  # pyright: ignore[reportPrivateUsage]
            return c
    table = _COMPS[module] = comps_by_name(module)
    return table.get(name)


def run_patterns(
    module: ModuleOp,
    patterns: Sequence[RewritePattern],
    comps: Iterable[ComputationOp] | None = None,
    scope: Scope | None = None,
    radius: int | None = None,
    start: Callable[[list[Operation]], list[Operation]] | None = None,
) -> bool:
    """Apply `patterns` greedily to a fixed point over `comps` (all computations by
    default); what changed goes into `scope.touched`. With `radius` (how far from a change
    the patterns' decisions look, see `hlopass.driver.worklist`), the walks start from `scope`'s
    seeds and confirm around what changed; without, they are whole-computation walks.
    `start`: see `worklist.Driver`."""
    from hlopass.driver.worklist import Driver

    applier = (
        patterns[0]
        if len(patterns) == 1
        else GreedyRewritePatternApplier(list(patterns), dce_enabled=False)
    )
    scope = scope if scope is not None else Scope()
    driver = Driver(applier, True, radius or 0, radius is None or scope.exhaustive, start)
    changed = False
    for comp in list(comps) if comps is not None else computations(module):
        walk = driver.rewrite(comp.block, scope.seeds_of(comp))
        changed |= scope.record(comp, walk)
    return changed


# --- matching -----------------------------------------------------------------------------


def const_array(value: SSAValue) -> np.ndarray | None:
    """The ndarray of a `constant` array value (None when not a constant or elided)."""
    o = owner(value)
    # (`OPCODE`, the class attribute, first: `opcode` and `shape` are property calls, and
    # the algsimp patterns ask of every constant-like operand they look at)
    if o is None or o.OPCODE != "constant" or not isinstance(o.shape, ArrayShape):
        return None
    lit = o.attr("value")
    return None if lit is None else lit.literal.array


def splat_value(value: SSAValue) -> Any:
    """The single element value of a splat constant or `broadcast(scalar constant)`, else None."""
    o = owner(value)
    if o is None:
        return None
    opcode = o.OPCODE
    if opcode == "broadcast" and o._operands:  # pyright: ignore[reportPrivateUsage]
        inner = const_array(o.operands[0])
        if inner is not None and inner.size == 1:
            return inner.reshape(()).item() if inner.dtype.kind in "biuf" else inner.reshape(())[()]
        return None
    if opcode != "constant" or not isinstance(o.shape, ArrayShape):
        return None
    lit = o.attr("value")
    return None if lit is None else lit.literal.splat()


def _is_value(value: SSAValue, target: float) -> bool:
    v = splat_value(value)
    if v is None:
        return False
    try:
        return bool(v == target) and not (isinstance(v, float) and v != v)
    except (TypeError, ValueError):
        return False


def is_zero(value: SSAValue) -> bool:
    """`value` is a splat constant (or broadcast scalar constant) equal to 0 (-0.0 too)."""
    return _is_value(value, 0)


def is_one(value: SSAValue) -> bool:
    """`value` is a splat constant (or broadcast scalar constant) equal to 1."""
    return _is_value(value, 1)


def is_constant_like(value: SSAValue) -> bool:
    """A constant, or a broadcast of one."""
    o = owner(value)
    if o is None:
        return False
    if o.opcode == "constant":
        return True
    return (
        o.opcode == "broadcast"
        and owner(o.operands[0]) is not None
        and (
            owner(o.operands[0]).opcode == "constant"  # type: ignore[union-attr]
        )
    )


def same_shape(a: Shape, b: Shape) -> bool:
    """Equal including layouts (a missing layout equals the default one)."""
    if a == b:
        return True
    if isinstance(a, ArrayShape) and isinstance(b, ArrayShape):
        return (
            a.compatible(b)
            and a.minor_to_major == b.minor_to_major
            and not (a.layout and a.layout.has_extras())
            and not (b.layout and b.layout.has_extras())
        )
    if isinstance(a, TupleShape) and isinstance(b, TupleShape):
        return len(a.elements) == len(b.elements) and all(
            same_shape(x, y) for x, y in zip(a.elements, b.elements, strict=False)
        )
    return False


def value_shape(value: SSAValue) -> Shape:
    """The HLO shape (with layout) of an SSA value: its type's `Shape`."""
    return value.type.data  # type: ignore[attr-defined]


def is_root(op: HloOp) -> bool:
    """`op` is its computation's ROOT (the `hlo.return` uses it)."""
    return any(isinstance(u.operation, ReturnOp) for u in op.result.uses)


def module_of(op: Operation) -> ModuleOp | None:
    """The module around `op` (None when it is detached). Asked for every instruction a
    pattern looks at, so it follows the `parent` fields, not the `parent_op()` calls."""
    p: Any = op
    while True:
        block = p.parent
        region = block.parent if block is not None else None
        p = region.parent if region is not None else None
        if p is None:
            return None
        t = type(p)
        found = _MODULE_CLASS.get(t)
        if found is None:
            found = _MODULE_CLASS[t] = issubclass(t, ModuleOp)
        if found:
            return p


_MODULE_CLASS: dict[type, bool] = {}
"""op class -> whether it is a `ModuleOp` (as `_HLO_CLASS`, without `isinstance`'s cost)."""


def comps_by_name(module: ModuleOp) -> dict[str, ComputationOp]:
    """The computations of `module` by name (a snapshot: edits after it are not seen)."""
    return {c.comp_name: c for c in computations(module)}


_MAY_CALL: dict[type, bool] = {}
"""op class -> whether its opcode has computation attributes (`to_apply`, `calls`, ...)."""


class CallIndex:
    """One computation's instructions that call computations, with their opcodes and
    callee names, and the names its instructions list as control predecessors: what the
    module-wide questions of a pass run read, from one walk over the computation (or from
    the previous index and the instructions a pass run touched: `updated`)."""

    __slots__ = ("block", "calls", "pinned", "pinners", "sites")

    def __init__(self, comp: ComputationOp):
        calls: list[tuple[HloOp, list[str]]] = []
        pinners: list[HloOp] = []
        may_call = _MAY_CALL
        # (`_callees` inline, down the op chain: the fixpoint indexes every instruction)
        op = comp.block._first_op  # pyright: ignore[reportPrivateUsage]
        while op is not None:
            calls_some = may_call.get(type(op))
            if calls_some is None:
                calls_some = _may_call(type(op))
            if calls_some:
                names = op.callees()  # type: ignore[attr-defined]
                if names:
                    calls.append((op, names))  # type: ignore[arg-type]
            if "control-predecessors" in op.properties:
                pinners.append(op)  # type: ignore[arg-type]
            op = op._next_op  # pyright: ignore[reportPrivateUsage]
        self._set(comp, calls, pinners)

    def _set(self, comp: ComputationOp, calls: list[tuple[HloOp, list[str]]],
             pinners: list[HloOp]) -> None:  # fmt: skip
        self.block = comp.block
        self.calls = calls
        self.pinners = pinners
        """The instructions with control predecessors."""
        self.pinned = frozenset(n for op in pinners for n in op.attr("control-predecessors") or ())
        self.sites = {(op.opcode, name) for op, names in calls for name in names}
        """(opcode, callee name) of each call."""

    def updated(self, comp: ComputationOp, touched: Iterable[Operation]) -> CallIndex:
        """The index of `comp` after a pass run that edited it only through a tracking
        rewriter, `touched` being what it touched (created, or modified in place: operands,
        attributes): an instruction not touched and still there kept its callees and
        control predecessors, one gone is dropped, a touched one is read again. Walking the
        whole computation again is left for a touched instruction that calls and did not
        before (its place among the calls would need the walk): rebuilt after every pass
        run that edits Mixtral's 29k-instruction entry, the walk was a twentieth of the
        fixpoint pipeline."""
        block = comp.block
        if block is not self.block:
            return CallIndex(comp)
        touched = {op for op in touched if op.parent is block}
        calls: list[tuple[HloOp, list[str]]] = []
        was_calling: set[Operation] = set()
        for op, names in self.calls:
            if op.parent is not block:
                continue  # erased
            if op in touched:
                was_calling.add(op)
                names = _callees(op)
                if not names:
                    continue
            calls.append((op, names))
        if any(_callees(op) for op in touched if op not in was_calling):
            return CallIndex(comp)  # a new call: its place in the order needs the walk
        pinners = [op for op in self.pinners if op.parent is block and op not in touched]
        pinners += [op for op in touched if "control-predecessors" in op.properties]  # type: ignore[misc]
        index = CallIndex.__new__(CallIndex)
        index._set(comp, calls, pinners)
        return index


def _may_call(t: type) -> bool:
    """Whether instructions of op class `t` may call computations (kept in `_MAY_CALL`)."""
    spec = getattr(t, "SPEC", None)
    found = _MAY_CALL[t] = spec is not None and bool(spec.computations)
    return found


def _callees(op: Operation) -> list[str]:
    """The computations `op` calls (none for an op whose opcode calls none)."""
    t = type(op)
    calls_some = _MAY_CALL.get(t)
    if calls_some is None:
        calls_some = _may_call(t)
    return op.callees() if calls_some else []  # type: ignore[attr-defined]


def call_instructions(
    module: ModuleOp, scope: Scope | None = None, fresh: Iterable[ComputationOp] = ()
) -> Iterator[tuple[ComputationOp, HloOp, list[str]]]:
    """(computation, instruction, callee names) of every instruction calling a computation,
    in module order; from `scope.index` where it has the computation and it is not in
    `fresh` (computations edited since the index was taken), else from a walk over it."""
    index = scope.index if scope is not None else None
    fresh = set(fresh)
    for comp in computations(module):
        known = index.get(comp) if index is not None and comp not in fresh else None
        calls = known.calls if known is not None else CallIndex(comp).calls
        for op, names in calls:
            yield comp, op, names


def call_sites_only(
    module: ModuleOp, scope: Scope | None = None, keep: Callable[[HloOp], bool] | None = None
) -> dict[str, list[HloOp] | None]:
    """Per called computation: the `call` instructions calling it, or None when anything
    else calls it (another opcode, or a call `keep` refuses)."""
    out: dict[str, list[HloOp] | None] = {}
    for _, op, names in call_instructions(module, scope):
        ok = op.OPCODE == "call" and (keep is None or keep(op))
        for name in names:
            if not ok:
                out[name] = None
            elif out.get(name, []) is not None:
                out.setdefault(name, []).append(op)  # type: ignore[union-attr]
    return out


def fusion_computations(module: ModuleOp, scope: Scope | None = None) -> set[str]:
    """Names of computations called by `fusion` instructions (XLA's fusion computations)."""
    out: set[str] = set()
    for _, op, names in call_instructions(module, scope):
        if op.OPCODE == "fusion":
            out.update(names)
    return out


def reachable_computations(
    module: ModuleOp, scope: Scope | None = None, fresh: Iterable[ComputationOp] = ()
) -> set[str]:
    """Names of the computations the entry calls, transitively, and the entry's."""
    callees: dict[str, list[str]] = {}
    for comp, _, names in call_instructions(module, scope, fresh):
        callees.setdefault(comp.comp_name, []).extend(names)
    entry = entry_computation(module)
    seen = {entry.comp_name}
    stack = [entry.comp_name]
    known = {c.comp_name for c in computations(module)}
    while stack:
        for name in callees.get(stack.pop(), ()):
            if name not in seen and name in known:
                seen.add(name)
                stack.append(name)
    return seen
