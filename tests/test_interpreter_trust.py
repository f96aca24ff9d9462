"""Modules the interpreter once crashed on with raw numpy messages (issue 12), each now
evaluated and compared with XLA:CPU bit for bit (integers, bit casts, single roundings) or
refused with one `HloError` line naming the instruction."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import hlopass
from hlopass.errors import HloError, HloResourceError
from tests.interp_util import assert_same, xla_execute_many

RNG = np.random.default_rng(12)


def _module(params: list[str], root: str, extra: str = "") -> str:
    lines = [f"  p{i} = {s} parameter({i})" for i, s in enumerate(params)]
    return (
        "HloModule m\n\n" + extra + "ENTRY e {\n" + "\n".join(lines) + f"\n  ROOT r = {root}\n}}\n"
    )


_ADD = (
    "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"
)
_GE = "ge {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT c = pred[] compare(x, y), direction=GE\n}\n\n"

CASES = {
    # sub-byte bitcast-convert: narrow elements along the last dimension pack little-endian
    "bitcast_s4_to_s8": (
        _module(["s4[8,2]"], "s8[8] bitcast-convert(p0)"),
        [np.array(RNG.integers(-8, 8, (8, 2)), ml_dtypes.int4)],
    ),
    "bitcast_s8_to_s4": (
        _module(["s8[8]"], "s4[8,2] bitcast-convert(p0)"),
        [np.array([-128, -77, -1, 0, 1, 37, 100, 127], np.int8)],
    ),
    "bitcast_u8_to_u4": (
        _module(["u8[4]"], "u4[4,2] bitcast-convert(p0)"),
        [np.array([0x12, 0xAB, 0xFF, 0x70], np.uint8)],
    ),
    "bitcast_u2_to_u8": (
        _module(["u2[3,4]"], "u8[3] bitcast-convert(p0)"),
        [np.array([[0, 1, 2, 3], [3, 3, 3, 3], [1, 0, 0, 2]], ml_dtypes.uint2)],
    ),
    "bitcast_s8_to_u4": (
        _module(["s8[4]"], "u4[4,2] bitcast-convert(p0)"),
        [np.array([-1, 5, -128, 127], np.int8)],
    ),
    # dot of mixed integer types (XLA widens both to the result type)
    "dot_s8_s16": (
        _module(["s8[8]", "s16[8]"], "s32[] dot(p0, p1), lhs_contracting_dims={0}, rhs_contracting_dims={0}"),
        [np.arange(-4, 4, dtype=np.int8) * 30, np.arange(8, dtype=np.int16) * 1000 - 3000],
    ),
    "dot_u8_s32_matrix": (
        _module(["u8[3,4]", "s32[4,2]"], "s32[3,2] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
        [RNG.integers(0, 256, (3, 4)).astype(np.uint8), RNG.integers(-1000, 1000, (4, 2)).astype(np.int32)],
    ),
    # convolution with negative padding (crops the input), and one where no window fits
    "conv_negative_padding": (
        _module(
            ["s32[2,6,1]", "s32[3,1,2]"],
            "s32[2,3,2] convolution(p0, p1), window={size=3 pad=-1_0}, dim_labels=b0f_0io->b0f",
        ),
        [RNG.integers(-9, 9, (2, 6, 1)).astype(np.int32), RNG.integers(-9, 9, (3, 1, 2)).astype(np.int32)],
    ),
    "conv_empty_output": (
        _module(
            ["s32[2,4,1]", "s32[3,1,2]"],
            "s32[2,0,2] convolution(p0, p1), window={size=3 pad=-1_-1}, dim_labels=b0f_0io->b0f",
        ),
        [RNG.integers(-9, 9, (2, 4, 1)).astype(np.int32), RNG.integers(-9, 9, (3, 1, 2)).astype(np.int32)],
    ),
    # scalar windows: XLA prints no `window=` for a rank-0 operand
    "select_and_scatter_scalar": (
        "HloModule m\n\n" + _GE + _ADD + "ENTRY e {\n  a = f32[] constant(42)\n"
        "  b = f32[] constant(1.5)\n  c = f32[] constant(2)\n"
        "  ROOT r = f32[] select-and-scatter(a, b, c), select=ge, scatter=add\n}\n",
        [],
    ),
    "reduce_window_scalar": (
        _module(["f32[]", "f32[]"], "f32[] reduce-window(p0, p1), to_apply=add", _ADD),
        [np.float32(3.25), np.float32(-1)],
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def xla_results(xla):
    import jax

    jax.config.update("jax_enable_x64", True)
    return dict(zip(CASES, xla_execute_many(list(CASES.values())), strict=True))


@pytest.mark.parametrize("case", list(CASES))
def test_matches_xla_cpu(case, xla_results):
    text, args = CASES[case]
    got = hlopass.evaluate(hlopass.parse_hlo(text), *args)
    want = xla_results[case]
    assert "outputs" in want, want
    assert len(got) == len(want["outputs"])
    for g, w in zip(got, want["outputs"], strict=True):
        assert_same(g, w, what=case)  # bit-exact: integers, bit casts, one f32 add


def test_repro_select_and_scatter_scalar_folds(corpus):
    """../shared/repros/cf_select_and_scatter_scalar.hlo: XLA's parser-test module."""
    path = corpus.parent / "repros" / "cf_select_and_scatter_scalar.hlo"
    if not path.exists():
        pytest.skip("repros folder absent")
    out = hlopass.evaluate(hlopass.parse_hlo(path.read_text(), str(path)))
    assert out[0].tolist() == 3.0  # init 2 + the one source value 1: checked by hand


def test_scalar_select_and_scatter_constant_folds_to_xlas_value():
    """The corpus module constant-folding failed on, with the values of the case
    select_and_scatter_scalar above, where XLA:CPU gives 3.5 (init 2 + source 1.5)."""
    from hlopass.pipeline import run_pipeline
    from hlopass.text.exporter import print_hlo

    text, _ = CASES["select_and_scatter_scalar"]
    module = hlopass.parse_hlo(text)
    assert run_pipeline(module, "constant-folding")
    assert re.search(r"ROOT %[\w.]+ = f32\[\] constant\(3.5\)\n}", print_hlo(module))


def test_huge_broadcast_is_a_resource_error_naming_the_instruction():
    text = _module(["bf16[]"], "bf16[24,2048,2048,3,4096] broadcast(p0), dimensions={}")
    with pytest.raises(
        HloResourceError, match=r"instruction r \(broadcast giving .*\) needs 2.25 TiB"
    ):
        hlopass.evaluate(hlopass.parse_hlo(text), np.array(1, ml_dtypes.bfloat16))


def test_fusion_with_mismatched_parameter_is_an_error():
    """tools__print_indexing_test.hlo passes s32[1024] to an s32[] fused parameter: rejected
    while reading, as XLA's verifier rejects it (tests/test_verifier_rules.py checks XLA)."""
    text = (
        "HloModule m\n\nf {\n  a = s32[] parameter(0)\n  ROOT n = s32[] negate(a)\n}\n\n"
        "ENTRY e {\n  p = s32[4] parameter(0)\n  ROOT r = s32[] fusion(p), kind=kLoop, calls=f\n}\n"
    )
    with pytest.raises(HloError, match=r"m.hlo:10:8: error: r: operand 0 s32\[4\] does not match"):
        hlopass.parse_hlo(text, "m.hlo")


def test_unsupported_op_is_unsupported_op_error():
    text = _module(["f32[4]"], 'f32[4] custom-call(p0), custom_call_target="nope"')
    with pytest.raises(hlopass.UnsupportedOpError, match="instruction r"):
        hlopass.evaluate(hlopass.parse_hlo(text), np.zeros(4, np.float32))


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        (np.zeros(4, np.float64), r"argument 0 \(parameter p0\) is f64\[4\], expected f32\[4\]"),
        (np.zeros(4, np.int32), r"is s32\[4\], expected f32\[4\]"),
        (np.zeros(5, np.float32), r"has shape \[5\], expected f32\[4\]"),
        ([1, 2, 3, 4], None),  # Python ints become f32: same kind rule
        ([1.5, 2, 3, 4], None),
    ],
)
def test_one_dtype_rule(arg, message):
    module = hlopass.parse_hlo(_module(["f32[4]"], "f32[4] negate(p0)"))
    if message is None:
        assert hlopass.evaluate(module, arg)[0].dtype == np.float32
        return
    with pytest.raises(hlopass.HloInputError, match=message):
        hlopass.evaluate(module, arg)


def test_python_float_for_int_parameter_is_rejected():
    module = hlopass.parse_hlo(_module(["s32[2]"], "s32[2] negate(p0)"))
    with pytest.raises(hlopass.HloInputError, match="expected s32"):
        hlopass.evaluate(module, [1.5, 2.0])
