"""The importer's fast op construction (`create_op`, `new_return_op`, `new_computation_op`)
builds the same IR state as xDSL's own constructors, so rewriters, verify(), clone() and
erase() behave the same."""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Block, OpResult
from xdsl.rewriter import Rewriter

from hlopass.dialects.hlo import (
    OP_CLASSES,
    ComputationOp,
    Results,
    ReturnOp,
    create_op,
    new_computation_op,
    new_return_op,
    shape_type,
    value_to_attr,
)
from hlopass.ir.shape import array
from hlopass.text.exporter import print_hlo
from hlopass.text.importer import parse_hlo

F32 = array("f32", (2,))


def _build(fast: bool):
    block = Block()
    if fast:
        p0 = create_op("parameter", [], F32, "p0", {"number": 0})
        p1 = create_op("parameter", [], F32, "p1", {"number": 1})
    else:
        cls = OP_CLASSES["parameter"]
        p0 = cls.create(
            result_types=[shape_type(F32)],
            properties={"name": StringAttr("p0"), "number": value_to_attr("int", 0)},
        )
        p1 = cls.create(
            result_types=[shape_type(F32)],
            properties={"name": StringAttr("p1"), "number": value_to_attr("int", 1)},
        )
    ops = [p0, p1]
    if fast:
        add = create_op("add", [p0.results[0], p1.results[0]], F32, "add")
        mul = create_op("multiply", [add.results[0], add.results[0]], F32, "mul")
        ret = new_return_op(mul.results[0])
    else:
        add = OP_CLASSES["add"].create(
            operands=[p0.results[0], p1.results[0]],
            result_types=[shape_type(F32)],
            properties={"name": StringAttr("add")},
        )
        mul = OP_CLASSES["multiply"].create(
            operands=[add.results[0], add.results[0]],
            result_types=[shape_type(F32)],
            properties={"name": StringAttr("mul")},
        )
        ret = ReturnOp(mul.results[0])
    ops += [add, mul, ret]
    for op in ops:
        block.add_op(op)
    comp = new_computation_op("main", block, True) if fast else ComputationOp("main", block, True)
    return ModuleOp([comp]), ops


def _state(op):
    d = dict(vars(op))
    # `hlo.Results` is `SSAValues` indexed in C (a subclass: everything else is the same);
    # the fast path's operands are a plain tuple of the same values (`_fill`)
    state = {k: "SSAValues" if isinstance(v, Results) else type(v).__name__ for k, v in d.items()}
    if state.get("_operands") == "tuple":
        state["_operands"] = "SSAValues"
    return state


def test_fast_ops_have_the_same_fields_and_uses():
    fast_mod, fast_ops = _build(True)
    slow_mod, slow_ops = _build(False)
    for f, s in zip(fast_ops, slow_ops, strict=True):
        assert type(f) is type(s)
        assert _state(f) == _state(s)
        assert f.properties == s.properties
        assert f.attributes == s.attributes
        assert f.location == s.location
        assert [r.type for r in f.results] == [r.type for r in s.results]
        assert all(isinstance(r, OpResult) and r.op is f and r.index == 0 for r in f.results)
        for fv, sv in zip(f.operands, s.operands, strict=True):
            assert fv.owner.inst_name == sv.owner.inst_name  # type: ignore[union-attr]
        # each use is registered on its operand
        for i, v in enumerate(f.operands):
            assert any(u.operation is f and u.index == i for u in v.uses)
    for f, s in zip(fast_ops, slow_ops, strict=True):
        for fr, sr in zip(f.results, s.results, strict=True):
            assert fr.uses.get_length() == sr.uses.get_length()
    fast_comp = fast_mod.regions[0].block.first_op
    slow_comp = slow_mod.regions[0].block.first_op
    assert _state(fast_comp) == _state(slow_comp)
    assert fast_comp.properties == slow_comp.properties
    assert fast_comp.regions[0].parent is fast_comp
    fast_mod.verify()
    slow_mod.verify()
    assert str(fast_mod) == str(slow_mod)
    assert print_hlo(fast_mod) == print_hlo(slow_mod)


def test_fast_ops_clone_replace_and_erase():
    mod, (p0, p1, add, mul, ret) = _build(True)
    clone = mod.clone()
    clone.verify()
    assert print_hlo(clone) == print_hlo(mod)
    # replace `add` by a new op and erase it: the use lists must be consistent.
    sub = create_op("subtract", [p0.results[0], p1.results[0]], F32, "sub")
    Rewriter.replace_op(add, sub)
    assert add.parent is None
    assert mul.operands[0] is sub.results[0] and mul.operands[1] is sub.results[0]
    assert sub.results[0].uses.get_length() == 2
    assert p0.results[0].uses.get_length() == 1  # add's use is gone
    mod.verify()
    text = print_hlo(mod)
    assert "subtract(%p0, %p1)" in text and "add(" not in text
    Rewriter.erase_op(ret)
    Rewriter.erase_op(mul)
    assert sub.results[0].uses.get_length() == 0


def test_parsed_ops_share_interned_attributes():
    text = """HloModule m
%r (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}
ENTRY %e (p: f32[2,3]) -> f32[] {
  %p = f32[2,3]{1,0} parameter(0)
  %z = f32[] constant(0)
  %x = f32[] reduce(%p, %z), dimensions={0,1}, to_apply=%r
  %y = f32[] reduce(%p, %z), dimensions={0,1}, to_apply=%r
  ROOT %t = f32[] add(%x, %y)
}
"""
    mod = parse_hlo(text)
    entry = mod.regions[0].block.last_op
    x, y = [o for o in entry.instructions if o.opcode == "reduce"]
    assert x.properties["dimensions"] is y.properties["dimensions"]
    assert x.attr("dimensions") == (0, 1) and y.attr("to_apply") == "r"
    y.set_attr("dimensions", (1, 0))  # a change on one op leaves the other alone
    assert x.attr("dimensions") == (0, 1)
    assert "dimensions={1,0}" in print_hlo(mod) and "dimensions={0,1}" in print_hlo(mod)
    mod.verify()


def test_long_blank_runs_do_not_slow_the_fast_path():
    # The fast instruction-head regex must not backtrack into runs of blanks when the
    # instruction it faces needs the general parser (here: a tuple shape).
    import time

    blanks = " \n" * 40 + " " * 40
    text = (
        "HloModule m\nENTRY %e (p: f32[]) -> (f32[], f32[]) {\n  %p = f32[] parameter(0)"
        + blanks
        + "ROOT %t = (f32[], f32[]) tuple(%p, %p)\n}\n"
    )
    t0 = time.perf_counter()
    mod = parse_hlo(text)
    assert time.perf_counter() - t0 < 5
    assert "ROOT %t = (f32[], f32[]) tuple(%p, %p)" in print_hlo(mod)


def test_operands_and_results_index_as_tuples_and_args_keeps_types():
    """`Operands`/`Results` index in C: an index gives the value, a slice a plain tuple of
    the values; the `args` accessor (read by xDSL's generic verifier) is `SSAValues`."""
    _, ops = _build(True)
    p0, p1, add, mul, _ret = ops
    a, b = p0.results[0], p1.results[0]
    assert add.operands[0] is a and add.operands[1] is b and add.operands[-1] is b
    assert add.operands[1:] == (b,) and add.operands[:] == (a, b)
    assert add.results[0] is add.result and add.results[0:1] == (add.result,)
    assert add.args.types == (a.type, b.type)
    assert mul.args.types == (add.result.type, add.result.type)
    add.operands[1] = a  # replacing an operand still moves its use
    assert add.operands[1] is a and b.first_use is None
