"""Texts the first print takes instead of making them: an array shape token the module
spells as XLA prints it becomes its type's printed text at parse time
(`parse_values._is_printed_form`), and a scalar constant's text is made once per value
(`literal.format_literal`). Each must print exactly what rendering would."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hlopass import parse_hlo, print_hlo
from hlopass.dialects.hlo import computations
from hlopass.text.lexer import SHAPE_RE
from hlopass.text.parse_values import _array_shape_from_token, _is_printed_form

_TOKEN = re.compile(SHAPE_RE)


@pytest.mark.parametrize(
    ("tok", "printed"),
    [
        ("f32[]", True),
        ("f32[2]{0}", True),
        ("bf16[16,512,768]{2,1,0}", True),
        ("s32[10,0]{0,1}", True),  # any permutation prints as written
        ("f8e4m3fn[3]{0}", True),
        ("f32[2,3]", False),  # no layout: XLA prints the default one
        ("f32[02]{0}", False),  # XLA prints 2
        ("f32[2]{00}", False),
        ("f32[2, 3]{1,0}", False),
        ("f32[2]{0:T(8)}", False),  # tiles, memory spaces: rendered by the printer
        ("f32[<=4]{0}", False),
        ("token[]", False),
        ("opaque_type[]", False),  # prints as opaque[]
    ],
)
def test_printed_form_by_hand(tok: str, printed: bool):
    shape = _array_shape_from_token(tok)
    assert _is_printed_form(tok, shape) is printed
    if printed:
        assert shape._render(True) == tok
        assert shape._render(False) == tok[: tok.index("]") + 1]


def test_printed_form_agrees_with_rendering_on_the_corpus(corpus: Path):
    """Every array shape token of the corpus that the parser takes as printed text is
    what the printer renders for its shape, with and without the layout."""
    files = sorted(corpus.rglob("*.hlo"))
    assert len(files) > 100, "the corpus is missing"
    seen: set[str] = set()
    taken = 0
    for path in files:
        for m in _TOKEN.finditer(path.read_text()):
            tok = m.group()
            if tok in seen:
                continue
            seen.add(tok)
            try:
                shape = _array_shape_from_token(tok)
            except ValueError:
                continue
            if _is_printed_form(tok, shape):
                taken += 1
                assert shape._render(True) == tok
                assert shape._render(False) == tok[: tok.index("]") + 1]
    assert taken > 1000  # the usual case: the corpus was printed by XLA


def _strip_type_texts(module) -> None:
    for comp in computations(module):
        for op in comp.instructions:
            d = op.results[0].type.__dict__
            d.pop("_hlo_text", None)
            d.pop("_hlo_text_nl", None)


def test_print_with_parse_time_type_texts_equals_rendered(corpus: Path):
    path = corpus / "seeds" / "001_c2c20f964a2c12a7.hlo"
    text = path.read_text()
    first = print_hlo(parse_hlo(text, str(path)))
    m = parse_hlo(text, str(path))
    _strip_type_texts(m)
    assert print_hlo(m) == first


SCALARS = """HloModule scalars

ENTRY e {
  a = f32[] constant(-0)
  b = f32[] constant(0)
  c = f16[] constant(1.875)
  d = bf16[] constant(1)
  e = s8[] constant(-1)
  f = u8[] constant(255)
  g = f32[] constant(0)
  ROOT t = (f32[], f32[], f16[], bf16[], s8[], u8[], f32[]) tuple(a, b, c, d, e, f, g)
}
"""


def test_scalar_texts_are_made_per_value_and_type():
    """Same bits, other type (f16 1.875 and bf16 1 are both 0x3F80; s8 -1 and u8 255 are
    0xFF), and equal values with other bits (-0, 0): each prints its own text. (Negative
    zero prints `-0.0`, the printer's one intended difference from XLA's `-0`: see
    `literal._NEG_ZERO`.)"""
    out = print_hlo(parse_hlo(SCALARS))
    consts = re.findall(r"(\w+) = \w+\[\] constant\(([^)]*)\)", out)
    assert consts == [
        ("a", "-0.0"),
        ("b", "0"),
        ("c", "1.875"),
        ("d", "1"),
        ("e", "-1"),
        ("f", "255"),
        ("g", "0"),
    ]
