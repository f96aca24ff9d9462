"""The verifier's shape rules (pad, reduce, dot, concatenate, convolution, dynamic-slice,
dynamic-update-slice) against XLA: each bad module is rejected by hlopass while reading
(`HloShapeError` at the instruction) and by XLA:CPU (its shape inference, run in a child
process); the corrected module is accepted by both and evaluates to XLA:CPU's values."""

from __future__ import annotations

import re

import numpy as np
import pytest

import hlopass
from hlopass.errors import HloShapeError
from hlopass.ir.literal import numpy_dtype
from tests.interp_util import assert_same, xla_execute_many

ADD = "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"


FMUL = (
    "fmul {\n  a = f32[4] parameter(0)\n  b = f32[] parameter(1)\n  c = f32[4] broadcast(b), "
    "dimensions={}\n  ROOT m = f32[4] multiply(a, c)\n}\n\n"
)


def _m(params: list[str], root: str, extra: str = "") -> str:
    lines = [f"  p{i} = {s} parameter({i})" for i, s in enumerate(params)]
    return (
        "HloModule m\n\n" + extra + "ENTRY e {\n" + "\n".join(lines) + f"\n  ROOT r = {root}\n}}\n"
    )


# (bad module, message, corrected module)
RULES = {
    "pad_result": (
        _m(["f32[6]", "f32[]"], "f32[7] pad(p0, p1), padding=-1_-2_1"), "gives f32[8], not f32[7]",
        _m(["f32[6]", "f32[]"], "f32[8] pad(p0, p1), padding=-1_-2_1"),
    ),
    "pad_rank": (
        _m(["f32[6]", "f32[]"], "f32[8] pad(p0, p1), padding=1_1x0_0"), "padding has 2 dimensions",
        _m(["f32[6]", "f32[]"], "f32[8] pad(p0, p1), padding=1_1"),
    ),
    "reduce_result": (
        _m(["f32[4,3]", "f32[]"], "f32[4] reduce(p0, p1), dimensions={0}, to_apply=add", ADD),
        "gives dimensions [3], not f32[4]",
        _m(["f32[4,3]", "f32[]"], "f32[3] reduce(p0, p1), dimensions={0}, to_apply=add", ADD),
    ),
    "reduce_init_not_scalar": (
        _m(["f32[4,4]", "f32[4]"], "f32[4] reduce(p0, p1), dimensions={0}, to_apply=add", ADD),
        "init value f32[4] is not a scalar",
        _m(["f32[4,4]", "f32[]"], "f32[4] reduce(p0, p1), dimensions={0}, to_apply=add", ADD),
    ),
    "dot_contracting_out_of_range": (
        _m(["f32[4,8]", "f32[8,3]"], "f32[4,3] dot(p0, p1), lhs_contracting_dims={2}, rhs_contracting_dims={0}"),
        "dot lhs dimension 2 is out of range",
        _m(["f32[4,8]", "f32[8,3]"], "f32[4,3] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    ),
    "dot_sizes": (
        _m(["f32[4,8]", "f32[7,3]"], "f32[4,3] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
        "differ in size",
        _m(["f32[4,7]", "f32[7,3]"], "f32[4,3] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    ),
    "dot_outer_product": (
        _m(["s32[8]", "s32[8]"], "s32[8] dot(p0, p1)"), "gives dimensions [8, 8]",
        _m(["s32[8]", "s32[8]"], "s32[8,8] dot(p0, p1)"),
    ),
    "concatenate_bounded_operand": (
        _m(["f32[2]", "f32[4]", "f32[<=1]"], "f32[9] concatenate(p0, p1, p2), dimensions={0}"),
        "concatenate of f32[2], f32[4] and f32[<=1] gives dimensions [7], not f32[9]",
        _m(["f32[2]", "f32[4]", "f32[3]"], "f32[9] concatenate(p0, p1, p2), dimensions={0}"),
    ),
    "convolution_result": (
        _m(["f32[2,6,1]", "f32[3,1,2]"], "f32[2,6,2] convolution(p0, p1), window={size=3}, dim_labels=b0f_0io->b0f"),
        "gives dimensions [2, 4, 2]",
        _m(["f32[2,6,1]", "f32[3,1,2]"], "f32[2,4,2] convolution(p0, p1), window={size=3}, dim_labels=b0f_0io->b0f"),
    ),
    "convolution_features": (
        _m(["f32[2,6,3]", "f32[3,1,2]"], "f32[2,4,2] convolution(p0, p1), window={size=3}, dim_labels=b0f_0io->b0f"),
        "disagree in features",
        _m(["f32[2,6,3]", "f32[3,3,2]"], "f32[2,4,2] convolution(p0, p1), window={size=3}, dim_labels=b0f_0io->b0f"),
    ),
    "dynamic_slice_sizes": (
        _m(["f32[8]", "s32[]"], "f32[9] dynamic-slice(p0, p1), dynamic_slice_sizes={9}"),
        "do not fit f32[8]",
        _m(["f32[8]", "s32[]"], "f32[3] dynamic-slice(p0, p1), dynamic_slice_sizes={3}"),
    ),
    "dynamic_update_slice_too_big": (
        _m(["f32[4]", "f32[5]", "s32[]"], "f32[4] dynamic-update-slice(p0, p1, p2)"),
        "update f32[5] does not fit in f32[4]",
        _m(["f32[4]", "f32[2]", "s32[]"], "f32[4] dynamic-update-slice(p0, p1, p2)"),
    ),
    # XLA's ShapeVerifier::HandleCall: the operands match the called computation's
    # parameters (found in the corpus: generate_hlo_test_checks_test_{input,output}.hlo#4)
    "call_operand_shape": (
        _m(["f32[4]", "f32[4]"], "f32[] call(p0, p1), to_apply=add", ADD),
        "operand 0 f32[4] does not match parameter 0 of add, f32[]",
        _m(["f32[]", "f32[]"], "f32[] call(p0, p1), to_apply=add", ADD),
    ),
    "call_operand_type": (
        _m(["f32[]", "s32[]"], "f32[] call(p0, p1), to_apply=add", ADD),
        "operand 1 s32[] does not match parameter 1 of add, f32[]",
        _m(["f32[]", "f32[]"], "f32[] call(p0, p1), to_apply=add", ADD),
    ),
    "call_operand_count": (
        _m(["f32[]"], "f32[] call(p0), to_apply=add", ADD),
        "passes 1 operand(s) to add, which takes 2",
        _m(["f32[]", "f32[]"], "f32[] call(p0, p1), to_apply=add", ADD),
    ),
    # ... and a fusion's, those of its fused computation (HloVerifier: "Shape mismatch
    # between parameter number 1 and its operand"; corpus: tools__print_indexing_test.hlo)
    "fusion_operand_shape": (
        _m(["f32[4]", "f32[4]"], "f32[4] fusion(p0, p1), kind=kLoop, calls=fmul", FMUL),
        "operand 1 f32[4] does not match parameter 1 of fmul, f32[]",
        _m(["f32[4]", "f32[]"], "f32[4] fusion(p0, p1), kind=kLoop, calls=fmul", FMUL),
    ),
    # (fewer operands than parameters; XLA's verifier lets a fusion pass more, which we
    # accept too, though XLA:CPU 0.10.2 aborts on such a module)
    "fusion_operand_count": (
        _m(["f32[4]"], "f32[4] fusion(p0), kind=kLoop, calls=fmul", FMUL),
        "passes 1 operand(s) to fmul, which takes 2",
        _m(["f32[4]", "f32[]"], "f32[4] fusion(p0, p1), kind=kLoop, calls=fmul", FMUL),
    ),
}  # fmt: skip


def _args(text: str) -> list[np.ndarray]:
    module = hlopass.parse_hlo(text)
    from hlopass.interpreter.core import interpreter_for

    rng = np.random.default_rng(5)
    out = []
    for p in interpreter_for(module).entry().parameters():
        dt = numpy_dtype(p.shape.element_type)
        if dt.kind in "iu":
            out.append(rng.integers(0, 3, p.shape.dims).astype(dt))
        else:  # small integers in floats: sums and products are exact in any order
            out.append(rng.integers(-4, 5, p.shape.dims).astype(dt))
    return out


def _bad_args(text: str) -> list[np.ndarray]:
    """Arguments for the bad module (the parameters as written)."""
    shapes = [
        line.split("= ")[1].split(" parameter")[0]
        for line in text.splitlines()
        if "parameter(" in line
    ]
    out = []
    for s in shapes:
        et, dims = s.split("[")
        sizes = [int(d.replace("<=", "")) for d in dims.rstrip("]").split(",") if d]
        out.append(np.zeros(sizes, numpy_dtype(et)))
    return out


@pytest.fixture(scope="module")
def xla_results(xla):
    cases = []
    for bad, _, good in RULES.values():
        cases.append((bad, _bad_args(bad)))
        cases.append((good, _args(good)))
    return xla_execute_many(cases)


@pytest.mark.parametrize("rule", list(RULES))
def test_hlopass_rejects_and_accepts(rule: str):
    bad, message, good = RULES[rule]
    with pytest.raises(HloShapeError, match=re.escape(message)) as info:
        hlopass.parse_hlo(bad, "bad.hlo")
    assert info.value.line == bad.count("\n") - 1  # the ROOT line
    hlopass.parse_hlo(good, "good.hlo")


@pytest.mark.parametrize("rule", list(RULES))
def test_xla_agrees(rule: str, xla_results):
    i = list(RULES).index(rule)
    bad_result, good_result = xla_results[2 * i], xla_results[2 * i + 1]
    assert "outputs" not in bad_result, f"XLA:CPU accepts the bad module of {rule}"
    assert "outputs" in good_result, good_result
    _, _, good = RULES[rule]
    got = hlopass.evaluate(hlopass.parse_hlo(good), *_args(good))
    for g, w in zip(got, good_result["outputs"], strict=True):
        assert_same(g, w, what=rule)  # small integers: exact in any summation order


# Instructions whose shape XLA's parser derives, whatever the text declares (found by the
# fuzzer: the declared shape leaked into the computation's signature, which XLA rejects).
DERIVED = {
    "after-all": "a = token[] parameter(0)\n  ROOT r = f32[] after-all(a)",
    "add-dependency": "a = f32[2] parameter(0)\n  t = token[] after-all()\n  ROOT r = s32[] add-dependency(a, t)",
    "send": "a = f32[4] parameter(0)\n  b = token[] parameter(1)\n  ROOT r = (f32[4], f32[4]) send(a, b), channel_id=1",
    "send-done": "a = f32[4] parameter(0)\n  b = token[] parameter(1)\n"
    "  s = (f32[4], u32[], token[]) send(a, b), channel_id=1\n  ROOT r = c64[] send-done(s), channel_id=1",
}  # fmt: skip


@pytest.mark.parametrize("opcode", list(DERIVED))
def test_derived_shapes_print_as_xla_does(opcode: str, xla):
    from hlopass.text.exporter import print_hlo

    text = "HloModule m\n\nENTRY e {\n  " + DERIVED[opcode] + "\n}\n"
    assert print_hlo(hlopass.parse_hlo(text)) == xla.reprint(text)


def test_fusion_may_pass_more_operands_than_parameters():
    """XLA's ShapeVerifier::HandleFusion rejects only a fusion with more parameters than
    operands ("Fused parameter count (%d) is greater than the number of operands")."""
    text = _m(
        ["f32[4]", "f32[]", "f32[3]"], "f32[4] fusion(p0, p1, p2), kind=kLoop, calls=fmul", FMUL
    )
    module = hlopass.parse_hlo(text, "extra.hlo")
    x, y = np.arange(4, dtype=np.float32), np.float32(3)
    (got,) = hlopass.evaluate(module, x, y, np.zeros(3, np.float32))
    assert_same(got, x * y)  # exact: small integers


def test_partition_id_must_be_u32():
    """XLA's parser aborts the process (a CHECK failure) on `s32[] partition-id()`."""
    with pytest.raises(HloShapeError, match=r"partition-id gives u32\[\], not s32\[\]"):
        hlopass.parse_hlo(_m([], "s32[] partition-id()"))


# Rules of XLA's parser (not of XLA:CPU's execution: these ops need several devices or a
# host), found by the fuzzer where hlopass accepted a module XLA rejects or aborts on.
# (bad module, message, corrected module); XLA's verdicts come from a child process.
_SEND = "s = (f32[4], u32[], token[]) send(p0, p1), channel_id=1"
_RECV = "s = (f32[4], u32[], token[]) recv(p0), channel_id=1"
PARSER_RULES = {
    "send_done_channel": (
        _m(["f32[4]", "token[]"], "token[] send-done(s), channel_id=2", extra="").replace("  ROOT", f"  {_SEND}\n  ROOT"),
        "send-done r has channel_id=2, its send has channel_id=1",
        _m(["f32[4]", "token[]"], "token[] send-done(s), channel_id=1").replace("  ROOT", f"  {_SEND}\n  ROOT"),
    ),
    "send_done_no_channel": (
        _m(["f32[4]", "token[]"], "token[] send-done(s)").replace("  ROOT", f"  {_SEND}\n  ROOT"),
        "send-done r has no channel_id, its send has channel_id=1",
        _m(["f32[4]", "token[]"], "token[] send-done(s), channel_id=1").replace("  ROOT", f"  {_SEND}\n  ROOT"),
    ),
    "recv_done_channel": (
        _m(["token[]"], "(f32[4], token[]) recv-done(s), channel_id=3").replace("  ROOT", f"  {_RECV}\n  ROOT"),
        "recv-done r has channel_id=3, its recv has channel_id=1",
        _m(["token[]"], "(f32[4], token[]) recv-done(s), channel_id=1").replace("  ROOT", f"  {_RECV}\n  ROOT"),
    ),
    "all_to_all_split_dims": (
        _m(["s32[16,4,64]"], "s32[16,4,64] all-to-all(p0), dimensions={0,2,1}"),
        "all-to-all takes one split dimension, got dimensions={0,2,1}",
        _m(["s32[16,4,64]"], "s32[16,4,64] all-to-all(p0), dimensions={1}"),
    ),
    "all_to_all_empty_dims": (
        _m(["s32[16,4,64]"], "s32[16,4,64] all-to-all(p0), dimensions={}"),
        "all-to-all takes one split dimension, got dimensions={}",
        _m(["s32[16,4,64]"], "s32[16,4,64] all-to-all(p0)"),
    ),
    "tuple_tile_zero": (  # XLA validates the layouts of a tuple shape, not of an array one
        _m(["f32[5,5]"], "(f32[5,5]{1,0:T(0)}) tuple(p0)"),
        "tile (0) of a tuple element's layout must have positive sizes",
        _m(["f32[5,5]"], "(f32[5,5]{1,0:T(2)}) tuple(p0)"),
    ),
    "dynamic_reshape_sizes": (  # XLA aborts on it (a CHECK failure)
        _m(["f64[256]", "s32[]"], "f64[16,16] dynamic-reshape(p0, p1)"),
        "dynamic-reshape to f64[16,16] takes the operand and 2 size operand(s), got 1",
        _m(["f64[256]", "s32[]"], "f64[16,16] dynamic-reshape(p0, p1, p1)"),
    ),
}  # fmt: skip


@pytest.mark.parametrize("rule", list(PARSER_RULES))
def test_parser_rule_rejects_and_accepts(rule: str):
    bad, message, good = PARSER_RULES[rule]
    with pytest.raises(hlopass.HloParseError, match=re.escape(message)) as info:
        hlopass.parse_hlo(bad, "bad.hlo")
    assert info.value.line == bad.count("\n") - 1  # the ROOT line
    hlopass.parse_hlo(good, "good.hlo")


def test_parser_rules_agree_with_xla(xla):
    from hlopass.checking.fuzz import xla_accepts_many

    texts = [t for bad, _, good in PARSER_RULES.values() for t in (bad, good)]
    verdicts = xla_accepts_many(texts)
    for i, rule in enumerate(PARSER_RULES):
        assert not verdicts[2 * i][0], f"XLA accepts the bad module of {rule}"
        assert verdicts[2 * i + 1][0], (
            f"XLA rejects the corrected module of {rule}: {verdicts[2 * i + 1][1]}"
        )
