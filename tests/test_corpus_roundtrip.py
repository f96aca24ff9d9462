"""Every corpus module: parse, print, and compare byte for byte with XLA's own print.

Modules still known to differ are listed in KNOWN_DIFFERENCES with the reason; they run as
strict xfails, so a fix shows up as XPASS (and fails the run until the entry is removed).
"""

from __future__ import annotations

import difflib
import re

import pytest

from hlopass.checking.corpus import elide_like, modules
from hlopass.errors import HloShapeError
from hlopass.execution import oracle
from hlopass.text.exporter import print_hlo
from hlopass.text.importer import parse_hlo
from tests.conftest import CORPUS, CORPUS_MISSING, ORACLE_MISSING

MODULES = modules(CORPUS) if CORPUS is not None else []

KNOWN_DIFFERENCES: dict[str, str] = {}

# The one intended difference from XLA's printer: negative zero. XLA prints -0.0 as `-0`,
# which both XLA's parser and (before) ours read back as +0.0, so its print changes values.
# We read `-0` as -0.0 and print `-0.0` (XLA reads that as -0.0). In these modules only the
# sign of zero constants differs; compared with zero signs ignored (tests/test_negative_zero.py
# checks the values).
NEGATIVE_ZERO_MODULES = {
    "seeds/000_887393ea171d6a40.hlo": "BiasAddGrad reductions start from constant(-0)",
}

_ZERO = re.compile(r"(?<=[({ ,])-0(?:\.0)?(?=[)}, ])")


def _zero_sign_blind(m, text: str) -> str:
    return _ZERO.sub("0", text) if m.id in NEGATIVE_ZERO_MODULES else text


# XLA's parser accepts these but XLA's verifier rejects them; we verify while parsing, so
# each is refused by default with one `file:line:col: error:` line, and read as XLA's parser
# reads it with `verify=False` (`hlopass-opt --no-verify`, as `hlo-opt` reads XLA's own test
# inputs), then printed byte-identically to XLA's print.
VERIFIER_REJECTS = {
    "xla_tests/tools__tests__invalid_concat.hlo": "concatenate operands disagree in a non-concatenated dimension",
    # XLA:CPU rejects both too (StableHLO shape inference, checked with jaxlib 0.10.2):
    "xla_tests/hlo__transforms__tests__operand_upcaster.hlo": "dot(s8[8], s16[8]) without contracting dimensions is an outer product [8,8], not s32[8]",
    # convolution.4 (window size=3x3, kernel 2x2: XLA's InferConvolveShape requires each
    # window size to equal the kernel's spatial size; XLA:CPU compiles it only because the
    # StableHLO translation drops the window size) and reduce.2 (a non-scalar init value
    # f32[4]: XLA's reducer check wants scalars)
    "xla_tests/hlo__translate__hlo_to_mhlo__tests__import.hlo": "convolution.4 window 3x3 on a 2x2 kernel; reduce.2 has a non-scalar init value f32[4]",
    "xla_tests/hlo__transforms__tests__rewrite_bf16_conv_to_onednn.hlo#1": "the convolution gives bf16[8,0,5,5,32], not bf16[4,4,5,5,32]",
    # XLA's ShapeVerifier::HandleCall (XLA:CPU rejects them too: func.call operand types)
    "xla_tests/hlo__tools__tests__generate_hlo_test_checks_test_input.hlo#4": "call passes f32[4] to a f32[] parameter",
    "xla_tests/hlo__tools__tests__generate_hlo_test_checks_test_output.hlo#4": "call passes f32[4] to a f32[] parameter",
    # the same rule for a fusion (HloVerifier; XLA:CPU rejects it: "Shape mismatch between
    # parameter number 1 and its operand")
    "xla_tests/tools__print_indexing_test.hlo": "fusion passes s32[1024] to a s32[] parameter",
}


def _diff(want: str, got: str) -> str:
    lines = difflib.unified_diff(want.splitlines(), got.splitlines(), "xla", "hlopass", n=1)
    return "\n".join(list(lines)[:40])


def test_verifier_rejects_lists_corpus_modules():
    """Each entry names a module of the corpus (a renamed file would otherwise pass unseen)."""
    if CORPUS is None:
        pytest.skip(CORPUS_MISSING)
    assert set(VERIFIER_REJECTS) <= {m.id for m in MODULES}


def _params():
    out = []
    for m in MODULES:
        marks = []
        if m.id in KNOWN_DIFFERENCES:
            marks.append(pytest.mark.xfail(reason=KNOWN_DIFFERENCES[m.id], strict=True))
        out.append(pytest.param(m, id=m.id, marks=marks))
    return out


needs_corpus = pytest.mark.skipif(CORPUS is None, reason=CORPUS_MISSING)
needs_oracle = pytest.mark.skipif(not oracle.available(), reason=ORACLE_MISSING)


def _xla_print_or_skip(m) -> str:
    ok, why = oracle.accepts(m.text)
    if not ok:
        pytest.skip(f"not a module: XLA's parser rejects this chunk ({why})")
    return oracle.reprint(m.text)


@needs_corpus
@needs_oracle
@pytest.mark.parametrize("m", _params())
def test_byte_identical_to_xla(m):
    want = _xla_print_or_skip(m)
    verify = m.id not in VERIFIER_REJECTS
    if not verify:
        with pytest.raises(HloShapeError) as refused:
            parse_hlo(m.text, str(m.path))
        line = str(refused.value)
        assert "\n" not in line and re.match(rf"{re.escape(str(m.path))}:\d+:\d+: error: ", line)
    module = parse_hlo(m.text, str(m.path), verify=verify)
    got = _zero_sign_blind(m, print_hlo(module))
    want = _zero_sign_blind(m, elide_like(module, want))
    assert got == want, _diff(want, got)


@needs_corpus
@needs_oracle
@pytest.mark.parametrize("m", _params())
def test_second_round_matches_xla(m):
    """Re-parsing our print and printing again gives what XLA gives on its second round.

    Where XLA's print is a fixpoint this is the fixpoint property; on the modules where it
    is not (it renumbers stack-frame tables, reorders computations), we follow XLA.
    """
    want1 = _xla_print_or_skip(m)
    verify = m.id not in VERIFIER_REJECTS
    module = parse_hlo(m.text, str(m.path), verify=verify)
    first = print_hlo(module)
    second = print_hlo(parse_hlo(first, "<first print>", verify=verify))
    xla_second = oracle.reprint(want1)
    want2 = elide_like(module, xla_second)
    if want1 == xla_second:
        assert second == first, _diff(first, second)
    second, want2 = _zero_sign_blind(m, second), _zero_sign_blind(m, want2)
    assert second == want2, _diff(want2, second)
