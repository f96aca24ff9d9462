"""The driver's rewriter does xDSL's `insert`, `replace_all_uses_with` and `erase` itself in
the common case (issue 14): the same module, the same use lists and the same handler calls
in the same order as xDSL's `PatternRewriter`, and xDSL's own path (or its error) for the
cases it does not take. The patterns' `select(ops)` keeps what `wants` keeps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from hlopass import parse_hlo
from hlopass.checking.corpus import corpus_root, modules
from hlopass.dialects.hlo import HloOp, computations, create_op, entry_computation, op_list
from hlopass.driver.worklist import Journal, TrackingRewriter, tracking_rewriter
from hlopass.ir.shape import scalar
from hlopass.rewriting import OpcodeDispatchApplier
from hlopass.text.exporter import print_hlo

TEXT = """HloModule m

ENTRY main {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  a = f32[] add(p0, p1)
  n = f32[] negate(a)
  m = f32[] multiply(a, n)
  ROOT t = (f32[], f32[]) tuple(m, a)
}
"""


def _named(module: Any, name: str) -> HloOp:
    return next(
        op
        for op in op_list(entry_computation(module).block)
        if getattr(op, "inst_name", None) == name
    )


def _rewriter(kind: str, at: Operation, events: list[tuple[str, str]]) -> PatternRewriter:
    """A rewriter of `kind` ("tracking": the driver's; "xdsl": xDSL's own) recording its
    handler calls."""
    rw = tracking_rewriter(at, Journal()) if kind == "tracking" else PatternRewriter(at)

    def name(op: Operation) -> str:
        return getattr(op, "inst_name", type(op).__name__)

    rw.operation_insertion_handler.append(lambda op: events.append(("insert", name(op))))
    rw.operation_removal_handler.append(lambda op: events.append(("remove", name(op))))
    rw.operation_modification_handler.append(lambda op: events.append(("modify", name(op))))
    return rw


def _uses(module: Any) -> list[tuple[str, list[tuple[str, int]]]]:
    """Every instruction's users as (user, operand index), in use-list order."""
    out = []
    for op in op_list(entry_computation(module).block):
        for r in op.results:
            chain = []
            use = r.first_use
            while use is not None:
                chain.append((getattr(use.operation, "inst_name", "return"), use.index))
                use = use._next_use  # pyright: ignore[reportPrivateUsage]
            out.append((getattr(op, "inst_name", "return"), chain))
    return out


EDITS: dict[str, Callable[[Any, PatternRewriter], None]] = {}


def edit(f: Callable[[Any, PatternRewriter], None]) -> Callable[[Any, PatternRewriter], None]:
    EDITS[f.__name__] = f
    return f


@edit
def insert_at_visit(module: Any, rw: PatternRewriter) -> None:
    n = _named(module, "n")
    rw.insert(create_op("abs", [n.operands[0]], scalar("f32"), "x"))


@edit
def insert_at_point(module: Any, rw: PatternRewriter) -> None:
    m = _named(module, "m")
    rw.insert(create_op("abs", [m.operands[0]], scalar("f32"), "x"), InsertPoint.before(m))


@edit
def insert_at_first(module: Any, rw: PatternRewriter) -> None:
    p0 = _named(module, "p0")
    rw.insert(create_op("parameter", [], scalar("f32"), "x", {"number": 2}), InsertPoint.before(p0))


@edit
def insert_at_end(module: Any, rw: PatternRewriter) -> None:  # xDSL's path
    block = entry_computation(module).block
    rw.insert(
        create_op("abs", [_named(module, "a").result], scalar("f32"), "x"),
        InsertPoint.at_end(block),
    )


@edit
def insert_list(module: Any, rw: PatternRewriter) -> None:  # xDSL's path
    n = _named(module, "n")
    rw.insert(
        [
            create_op("abs", [n.result], scalar("f32"), "x"),
            create_op("abs", [n.result], scalar("f32"), "y"),
        ]
    )


@edit
def replace_uses(module: Any, rw: PatternRewriter) -> None:
    a, n = _named(module, "a"), _named(module, "n")
    rw.replace_all_uses_with(a.result, n.result)  # users: n itself, m, the tuple


@edit
def replace_then_erase(module: Any, rw: PatternRewriter) -> None:
    n, m = _named(module, "n"), _named(module, "m")
    rw.replace_all_uses_with(m.result, n.result)
    rw.erase(m)
    _assert_detached(m)


@edit
def replace_with_itself(module: Any, rw: PatternRewriter) -> None:
    a = _named(module, "a")
    rw.replace_all_uses_with(a.result, a.result)


def _assert_detached(op: Operation) -> None:
    """What xDSL leaves of an erased op: no block, no neighbours, no operand uses."""
    assert op.parent is None and op._prev_op is None and op._next_op is None  # pyright: ignore[reportPrivateUsage]
    assert op._operand_uses == ()  # pyright: ignore[reportPrivateUsage]


@edit
def erase_first(module: Any, rw: PatternRewriter) -> None:
    x = create_op("parameter", [], scalar("f32"), "x", {"number": 2})
    rw.insert(x, InsertPoint.before(_named(module, "p0")))
    rw.erase(x)
    _assert_detached(x)


@edit
def erase_used_unsafely(module: Any, rw: PatternRewriter) -> None:  # xDSL's path
    m = _named(module, "m")
    rw.erase(m, safe_erase=False)
    # the tuple now reads an erased value: what xDSL leaves
    assert type(_named(module, "t").operands[0]).__name__ == "ErasedSSAValue"


XDSL_PATH = {"insert_at_end", "insert_list", "replace_with_itself", "erase_used_unsafely"}
"""The edits the driver's rewriter hands to xDSL's own methods."""


@pytest.mark.parametrize("name", sorted(EDITS))
def test_same_module_uses_and_handler_calls_as_xdsl(name: str, monkeypatch: Any) -> None:
    results = {}
    for kind in ("tracking", "xdsl"):
        module = parse_hlo(TEXT)
        events: list[tuple[str, str]] = []
        rw = _rewriter(kind, _named(module, "n"), events)
        handed: list[str] = []  # calls of xDSL's own methods from the driver's
        if kind == "tracking":
            for method in ("insert", "erase", "replace_all_uses_with"):
                real = getattr(PatternRewriter, method)
                monkeypatch.setattr(PatternRewriter, method, _counting(real, handed))
        EDITS[name](module, rw)
        monkeypatch.undo()
        if kind == "tracking":
            assert bool(handed) == (name in XDSL_PATH), handed
        text = print_hlo(module) if name != "erase_used_unsafely" else ""
        results[kind] = (text, _uses(module), events, rw.has_done_action)
    assert results["tracking"] == results["xdsl"]


def _counting(real: Callable[..., Any], calls: list[str]) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        calls.append(real.__name__)
        return real(*args, **kwargs)

    return wrapped


def test_erasing_a_used_op_fails_as_in_xdsl() -> None:
    for kind in ("tracking", "xdsl"):
        module = parse_hlo(TEXT)
        rw = _rewriter(kind, _named(module, "n"), [])
        with pytest.raises(ValueError, match="still has uses"):
            rw.erase(_named(module, "m"))


def test_insert_into_another_block_keeps_xdsls_check() -> None:
    module = parse_hlo(TEXT)
    rw = _rewriter("tracking", _named(module, "n"), [])
    assert isinstance(rw, TrackingRewriter)
    other = computations(parse_hlo(TEXT))[-1].block
    point = InsertPoint.at_end(other)
    # a point whose op is not in its block (xDSL's points check it when made: forced)
    object.__setattr__(point, "insert_before", _named(module, "n"))
    with pytest.raises(ValueError):
        rw.insert(create_op("abs", [_named(module, "a").result], scalar("f32"), "x"), point)


def _select_patterns(module: Any) -> list[Any]:
    from hlopass.passes.algsimp import PATTERNS, AlgebraicSimplifierPass
    from hlopass.passes.constant_folding import (
        ConstantFoldingPass,
        Evaluator,
        FoldConstantInstruction,
    )
    from hlopass.passes.cse import EliminateCommonSubexpression, Fingerprints
    from hlopass.rewriting import RewriteContext

    ctx = RewriteContext.of(module)
    opts = AlgebraicSimplifierPass()
    applier = OpcodeDispatchApplier([cls(ctx, opts) for cls in PATTERNS])
    cf = FoldConstantInstruction(
        ctx, ConstantFoldingPass(), Evaluator(module, ConstantFoldingPass()), {}, {}
    )
    cse = EliminateCommonSubexpression(ctx, Fingerprints({}, False))
    return [applier, cf, cse]


def test_select_keeps_what_wants_keeps() -> None:
    from hlopass.passes.dce import _may_go  # pyright: ignore[reportPrivateUsage]
    from tests.test_algsimp_families import CASES

    texts = [(cid, text) for cid, _spec, text in CASES]
    root = corpus_root()
    if root is not None:  # (without the corpus: the family cases alone)
        texts += [(m.id, m.text) for m in modules(root, ("seeds", "jax"))[:12]]
    checked = 0
    for mid, text in texts:
        module = parse_hlo(text)
        patterns = _select_patterns(module)
        for comp in computations(module):
            ops = op_list(comp.block)
            for p in patterns:
                assert p.select(ops) == [op for op in ops if p.wants(op)], (mid, type(p).__name__)
            expected = [
                op
                for op in ops
                if isinstance(op, HloOp) and (op.result.first_use is None or op.opcode == "fusion")
            ]
            assert _may_go(ops) == expected
            checked += len(ops)
    assert checked > 1000
