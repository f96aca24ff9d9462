"""Malformed HLO: one line `file:line:col: error: message`, exit code 1, never a traceback.

Each case's text marks with `⟦` the place the error must point at (the marker is removed
before parsing); the expected line and column are computed from it, and the message must
contain the given words. The same cases run through `parse_hlo` (`HloParseError` with
`.line`/`.col`), through `hlopass-opt` in-process, and a sample through a real subprocess.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass

import pytest

from hlopass import HloParseError, HloShapeError
from hlopass.commands.cli import opt_main
from hlopass.text.importer import parse_hlo
from tests.conftest import sigint_default

MARK = "⟦"


@dataclass(frozen=True)
class Case:
    id: str
    marked: str  # HLO text with MARK where the error points
    message: str  # a substring of the message
    shape_error: bool = False  # raised by the verifier (HloShapeError)

    @property
    def text(self) -> str:
        return self.marked.replace(MARK, "", 1)

    @property
    def where(self) -> tuple[int, int]:
        at = self.marked.index(MARK)
        line = self.marked.count("\n", 0, at) + 1
        return line, at - (self.marked.rfind("\n", 0, at) + 1) + 1


H = "HloModule m\n\n"
P2 = "ENTRY main {\n  p0 = f32[4]{0} parameter(0)\n  p1 = f32[4]{0} parameter(1)\n"
ADD = "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"
OK_ROOT = "  ROOT r = f32[4]{0} add(p0, p1)\n}\n"


def body(*lines: str, root: str = OK_ROOT) -> str:
    """An ENTRY computation with parameters p0, p1: f32[4] and the given lines."""
    return H + P2 + "".join(f"  {line}\n" for line in lines) + root


CASES = [
    # --- lexical -----------------------------------------------------------------------
    Case("truncated", H + P2 + "  ROOT r = f32[4]{0} add(p0, " + MARK, "end of input"),
    Case("truncated_mid_shape", H + "ENTRY main {\n  p0 = " + MARK + "f32[4", "malformed shape"),
    Case(
        "unclosed_shape",
        H + "ENTRY main {\n  p0 = " + MARK + "f32[4 parameter(0)\n}\n",
        "malformed shape",
    ),  # fmt: skip
    Case(
        "stray_character",
        body(root="  ROOT r = f32[4]{0} add(p0, p1) " + MARK + "@\n}\n"),
        "unexpected character '@'",
    ),  # fmt: skip
    Case("stray_after_module", body() + MARK + "!\n", "unexpected character '!'"),
    Case(
        "unterminated_string",
        body(root="  ROOT r = f32[4]{0} add(p0, p1), metadata={op_name=" + MARK + '"abc}\n}\n'),
        "unterminated string",
    ),  # fmt: skip
    Case("unterminated_comment", body() + MARK + "/* no end\n", "unterminated comment"),
    Case("nul_byte", body(MARK + "\x00"), "unexpected character"),
    Case(
        "crlf_and_tab",
        "HloModule m\r\n\r\nENTRY main {\r\n\tp0 = f32[4]{0} parameter(0)\r\n"
        "\tROOT r = f32[4]{0} " + MARK + "frob(p0)\r\n}\r\n",
        "unknown opcode 'frob'",
    ),  # fmt: skip
    # --- module structure ----------------------------------------------------------------
    Case("empty_file", MARK, "no computation"),
    Case("header_only", H + MARK, "no computation"),
    Case(
        "missing_module_name",
        "HloModule\n\n" + MARK + "ENTRY main {\n  ROOT p = f32[] parameter(0)\n}\n",
        "expected a module name",
    ),  # fmt: skip
    Case(
        "unknown_module_attribute",
        "HloModule m, " + MARK + "foo=1\n\nENTRY main {\n  ROOT p = f32[] parameter(0)\n}\n",
        "unknown module attribute 'foo'",
    ),  # fmt: skip
    Case(
        "duplicate_entry",
        H
        + "ENTRY a {\n  ROOT p = f32[] parameter(0)\n}\n\n"
        + MARK
        + "ENTRY b {\n  ROOT p = f32[] parameter(0)\n}\n",
        "more than one ENTRY",
    ),  # fmt: skip
    Case(
        "duplicate_computation",
        H + ADD + MARK + ADD + "ENTRY main {\n  ROOT p = f32[] parameter(0)\n}\n",
        "computation 'add' is defined twice",
    ),  # fmt: skip
    Case("empty_computation", H + "ENTRY main {\n" + MARK + "}\n", "has no instructions"),
    Case(
        "unbalanced_computation",
        H + P2 + "  ROOT r = f32[4]{0} add(p0, p1)\n" + MARK,
        "missing its closing '}'",
    ),  # fmt: skip
    Case(
        "undefined_computation",
        body(
            "c = f32[] constant(0)",
            root="  ROOT r = f32[] reduce(p0, c), dimensions={0}, to_apply=" + MARK + "nope\n}\n",
        ),
        "computation 'nope' is not defined",
    ),  # fmt: skip
    Case(
        "callee_defined_after_use",
        H + "ENTRY main {\n  p0 = f32[4] parameter(0)\n  c = f32[] constant(0)\n"
        "  ROOT r = f32[] reduce(p0, c), dimensions={0}, to_apply=" + MARK + "add\n}\n\n"
        "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n",
        "computation 'add' is not defined before this use",
    ),  # fmt: skip
    Case(
        "self_call",
        H + "ENTRY main {\n  p0 = f32[] parameter(0)\n  ROOT r = f32[] call(p0), "
        "to_apply=" + MARK + "main\n}\n",
        "cannot call itself",
    ),  # fmt: skip
    Case(
        "declared_result_mismatch",
        H + "ENTRY main (p0: f32[4]) -> " + MARK + "f32[5] {\n"
        "  ROOT p0 = f32[4]{0} parameter(0)\n}\n",
        "declares result f32[5]",
    ),  # fmt: skip
    # --- instructions ----------------------------------------------------------------------
    Case(
        "unknown_opcode",
        body(root="  ROOT r = f32[4]{0} " + MARK + "frobnicate(p0, p1)\n}\n"),
        "unknown opcode 'frobnicate'",
    ),  # fmt: skip
    Case(
        "undefined_operand",
        body(root="  ROOT r = f32[4]{0} add(p0, " + MARK + "p9)\n}\n"),
        "instruction 'p9' is not defined",
    ),  # fmt: skip
    Case(
        "forward_reference",
        body("r = f32[4]{0} add(p0, " + MARK + "q)", root="  ROOT q = f32[4]{0} add(p0, p1)\n}\n"),
        "instruction 'q' is not defined",
    ),  # fmt: skip
    Case("duplicate_name", body(MARK + "p0 = f32[4]{0} negate(p1)"), "'p0' is used twice"),
    Case(
        "duplicate_parameter_number",
        body(MARK + "p2 = f32[4]{0} parameter(1)"),
        "parameter number 1 is used twice",
    ),  # fmt: skip
    Case(
        "parameter_gap",
        H
        + "ENTRY main {\n  p0 = f32[4]{0} parameter(0)\n  "
        + MARK
        + "ROOT p2 = f32[4]{0} parameter(2)\n}\n",
        "has no parameter(1)",
    ),  # fmt: skip
    Case(
        "two_roots",
        body(root=OK_ROOT[:-2] + "  " + MARK + "ROOT s = f32[4]{0} add(p0, p1)\n}\n"),
        "only one ROOT",
    ),  # fmt: skip
    Case(
        "missing_equals",
        body(root="  ROOT r " + MARK + "f32[4]{0} add(p0, p1)\n}\n"),
        "expected '='",
    ),
    Case(
        "missing_paren",
        body(root="  ROOT r = f32[4]{0} add " + MARK + "p0, p1\n}\n"),
        "expected '('",
    ),
    Case(
        "too_few_operands",
        body(root="  ROOT r = f32[4]{0} " + MARK + "add(p0)\n}\n"),
        "add takes 2 operand(s) but 1 given",
    ),  # fmt: skip
    Case(
        "too_many_operands",
        body(root="  ROOT r = f32[4]{0} " + MARK + "negate(p0, p1)\n}\n"),
        "negate takes 1 operand(s) but 2 given",
    ),  # fmt: skip
    Case(
        "typed_operand_mismatch",
        body(root="  ROOT r = f32[4]{0} add(f32[5]{0} " + MARK + "p0, p1)\n}\n"),
        "declared as f32[5]",
    ),  # fmt: skip
    # --- shapes and layouts ------------------------------------------------------------------
    Case(
        "invalid_element_type",
        body("x = " + MARK + "f31[4]{0} parameter(2)"),
        "unknown element type 'f31'",
    ),
    Case("bad_dimension", body("x = " + MARK + "f32[2,x]{1,0} parameter(2)"), "bad dimension 'x'"),
    Case(
        "huge_dimension",
        body("x = " + MARK + "f32[99999999999999999999]{0} parameter(2)"),
        "too large",
    ),  # fmt: skip
    Case(
        "token_with_dimensions",
        body("x = " + MARK + "token[2] parameter(2)"),
        "cannot have dimensions",
    ),
    Case(
        "layout_not_permutation",
        body("x = " + MARK + "f32[2,3]{0,0} parameter(2)"),
        "not a permutation",
    ),  # fmt: skip
    Case(
        "layout_wrong_rank", body("x = " + MARK + "f32[2,3]{0} parameter(2)"), "not a permutation"
    ),
    Case(
        "bad_tile",
        body("x = " + MARK + "f32[8,128]{1,0:T(8,x)} parameter(2)"),
        "bad layout attribute",
    ),
    Case(
        "unbalanced_tuple_shape",
        H + "ENTRY main {\n  ROOT p = (f32[], f32[] " + MARK + "parameter(0)\n}\n",
        "expected ','",
    ),  # fmt: skip
    Case(
        "too_deep",
        H + "ENTRY main {\n  ROOT p = " + "(" * 3000 + "f32[]" + ")" * 3000 + " parameter(0)\n}\n",
        "nests too deeply",
    ),  # marker placed below  # fmt: skip
    # --- attributes ------------------------------------------------------------------------
    Case(
        "unknown_attribute",
        body(root="  ROOT r = f32[4]{0} add(p0, p1), " + MARK + "foo=1\n}\n"),
        "unknown attribute 'foo' for add",
    ),  # fmt: skip
    Case(
        "duplicate_attribute",
        body(
            root="  ROOT r = pred[4]{0} compare(p0, p1), direction=EQ, "
            + MARK
            + "direction=NE\n}\n"
        ),
        "given twice",
    ),  # fmt: skip
    Case(
        "missing_attribute",
        body(root="  ROOT r = f32[4,4]{1,0} " + MARK + "broadcast(p0)\n}\n"),
        "missing attribute dimensions",
    ),  # fmt: skip
    Case(
        "bad_enum_value",
        body(root="  ROOT r = pred[4]{0} compare(p0, p1), direction=" + MARK + "XX\n}\n"),
        "invalid value 'XX' for direction",
    ),  # fmt: skip
    Case(
        "bad_int_value",
        H + "ENTRY main {\n  p = (f32[], f32[]) parameter(0)\n  ROOT g = f32[] "
        "get-tuple-element(p), index=" + MARK + "x\n}\n",
        "expected an integer",
    ),  # fmt: skip
    Case(
        "bad_bool_value",
        H + ADD + "ENTRY main {\n  p0 = f32[4]{0} parameter(0)\n  ROOT r = f32[4]{0} "
        "sort(p0), dimensions={0}, is_stable=" + MARK + "maybe, to_apply=add\n}\n",
        "expected true or false",
    ),  # fmt: skip
    Case(
        "unquoted_string",
        body(root="  ROOT r = f32[4]{0} custom-call(p0), custom_call_target=" + MARK + "foo\n}\n"),
        "expected a quoted string",
    ),  # fmt: skip
    Case(
        "unbalanced_metadata",
        body(root='  ROOT r = f32[4]{0} add(p0, p1), metadata={op_name="x"\n' + MARK),
        "end of input",
    ),  # fmt: skip
    Case(
        "bad_dim_labels",
        H + "ENTRY main {\n  a = f32[1,4,4,1]{3,2,1,0} parameter(0)\n"
        "  b = f32[2,2,1,1]{3,2,1,0} parameter(1)\n  ROOT c = f32[1,3,3,1]{3,2,1,0} convolution(a, b), "
        "window={size=2x2}, dim_labels=" + MARK + "bxyf_01io\n}\n",
        "expected dimension labels",
    ),  # fmt: skip
    Case(
        "bad_padding",
        body(
            "c = f32[] constant(0)",
            root="  ROOT r = f32[6]{0} pad(p0, c), padding=" + MARK + "1_x\n}\n",
        ),
        "unexpected character",
    ),  # fmt: skip
    Case(
        "bad_padding_kind",
        body(
            "c = f32[] constant(0)",
            root="  ROOT r = f32[6]{0} pad(p0, c), padding=" + MARK + "{1}\n}\n",
        ),
        "expected padding",
    ),  # fmt: skip
    Case(
        "bad_window_field",
        H + ADD + P2 + "  c = f32[] constant(0)\n  ROOT r = f32[3]{0} "
        "reduce-window(p0, c), window={size=2 " + MARK + "foo=1}, to_apply=add\n}\n",
        "unknown window field 'foo'",
    ),  # fmt: skip
    Case(
        "window_rank_mismatch",
        H + ADD + P2 + "  c = f32[] constant(0)\n  ROOT r = f32[3]{0} "
        "reduce-window(p0, c), window={size=2 " + MARK + "stride=1x1}, to_apply=add\n}\n",
        "stride has 2 dimensions, size has 1",
    ),  # fmt: skip
    Case(
        "bad_slice",
        body(root="  ROOT r = f32[2]{0} slice(p0), slice={" + MARK + "[0:2:1:4]}\n}\n"),
        "a slice range is",
    ),  # fmt: skip
    # --- literals --------------------------------------------------------------------------
    Case(
        "literal_element_count",
        body("c = f32[3]{0} constant(" + MARK + "{1, 2})"),
        "literal has 2 elements but shape f32[3]{0} needs 3",
    ),  # fmt: skip
    Case(
        "literal_bad_element",
        body("c = f32[2]{0} constant(" + MARK + "{1, x})"),
        "invalid f32 literal",
    ),
    Case(
        "literal_float_for_int",
        body("c = s32[2]{0} constant(" + MARK + "{1.5, 2})"),
        "invalid s32 literal",
    ),  # fmt: skip
    Case(
        "literal_out_of_range",
        body("c = f16[2]{0} constant(" + MARK + "{0, 1e+10})"),
        "value 1e+10 is out of range for f16",
    ),  # fmt: skip
    Case(
        "literal_not_a_number", body("c = f32[] constant(" + MARK + "abc)"), "invalid f32 literal"
    ),
    # --- shape rules (verifier) --------------------------------------------------------------
    Case(
        "add_shape_mismatch",
        H + "ENTRY main {\n  a = f32[2]{0} parameter(0)\n  b = f32[3]{0} parameter(1)\n"
        "  ROOT " + MARK + "r = f32[2]{0} add(a, b)\n}\n",
        "does not match",
        True,
    ),  # fmt: skip
    Case(
        "elementwise_result_mismatch",
        body(root="  ROOT " + MARK + "r = f32[5]{0} negate(p0)\n}\n"),
        "does not match result f32[5]",
        True,
    ),  # fmt: skip
    Case(
        "add_element_type_mismatch",
        body(root="  ROOT " + MARK + "r = s32[4]{0} add(p0, p1)\n}\n"),
        "add of f32[4] does not give s32[4]",
        True,
    ),  # fmt: skip
    Case(
        "compare_not_pred",
        body(root="  ROOT " + MARK + "r = f32[4]{0} compare(p0, p1), direction=EQ\n}\n"),
        "compare gives pred",
        True,
    ),  # fmt: skip
    Case(
        "tuple_index_out_of_range",
        H
        + "ENTRY main {\n  p = (f32[], f32[]) parameter(0)\n  ROOT "
        + MARK
        + "g = f32[] get-tuple-element(p), index=2\n}\n",
        "tuple index 2 out of range",
        True,
    ),  # fmt: skip
    Case(
        "broadcast_dimension_out_of_range",
        body(root="  ROOT " + MARK + "r = f32[4,4]{1,0} broadcast(p0), dimensions={7}\n}\n"),
        "out of range",
        True,
    ),  # fmt: skip
    Case(
        "broadcast_size_mismatch",
        body(root="  ROOT " + MARK + "r = f32[5,4]{1,0} broadcast(p0), dimensions={0}\n}\n"),
        "of a different size",
        True,
    ),  # fmt: skip
    Case(
        "reshape_element_count",
        body(root="  ROOT " + MARK + "r = f32[5]{0} reshape(p0)\n}\n"),
        "changes the number of elements",
        True,
    ),  # fmt: skip
    Case(
        "transpose_not_permutation",
        H
        + "ENTRY main {\n  p = f32[2,3]{1,0} parameter(0)\n  ROOT "
        + MARK
        + "t = f32[3,2]{1,0} transpose(p), dimensions={1,1}\n}\n",
        "not a permutation",
        True,
    ),  # fmt: skip
    Case(
        "slice_out_of_bounds",
        body(root="  ROOT " + MARK + "r = f32[2]{0} slice(p0), slice={[3:5]}\n}\n"),
        "out of bounds",
        True,
    ),  # fmt: skip
    Case(
        "concatenate_mismatch",
        H + "ENTRY main {\n  a = f32[2,1]{1,0} parameter(0)\n"
        "  b = f32[3,1]{1,0} parameter(1)\n  ROOT "
        + MARK
        + "c = f32[3,2]{1,0} concatenate(a, b), dimensions={1}\n}\n",
        "cannot concatenate",
        True,
    ),  # fmt: skip
]

# `too_deep` points wherever the recursion gave out; only its message is checked there.
_NO_PLACE = {"too_deep"}


def _case_text(c: Case) -> str:
    return c.text if MARK in c.marked else c.marked


def _where(c: Case) -> tuple[int, int] | None:
    return None if c.id in _NO_PLACE else c.where


def test_enough_cases():
    assert len(CASES) >= 30
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_parse_hlo_raises_with_place(case: Case):
    with pytest.raises(HloParseError) as info:
        parse_hlo(_case_text(case), "bad.hlo")
    e = info.value
    assert case.message in e.message, str(e)
    assert e.filename == "bad.hlo"
    want = _where(case)
    if want is not None:
        assert (e.line, e.col) == want, f"{e} (want {want[0]}:{want[1]})"
    assert isinstance(e, HloShapeError) == case.shape_error, str(e)
    assert "\n" not in str(e)
    assert re.fullmatch(r"bad\.hlo:\d+:\d+: error: .+", str(e)), str(e)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_cli_one_line_exit_1(case: Case, tmp_path, capsys):
    path = tmp_path / "bad.hlo"
    path.write_bytes(_case_text(case).encode("utf-8"))
    assert opt_main([str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    m = re.fullmatch(re.escape(str(path)) + r":(\d+):(\d+): error: (.+)", lines[0])
    assert m, lines[0]
    want = _where(case)
    if want is not None:
        assert (int(m.group(1)), int(m.group(2))) == want, lines[0]
    assert case.message in m.group(3)


def test_markers_point_at_a_token():
    """Sanity of the table: each marker sits right before non-blank text (or at the end)."""
    for c in CASES:
        if MARK in c.marked:
            after = c.marked[c.marked.index(MARK) + 1 :]
            assert after == "" or not after[0].isspace() or after[0] in "\x00", c.id


# --- files, not text ----------------------------------------------------------------------


def _run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    rc = opt_main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def test_missing_file(tmp_path, capsys):
    path = tmp_path / "nope.hlo"
    rc, out, err = _run_cli([str(path)], capsys)
    assert rc == 1 and out == ""
    assert err.splitlines() == [f"{path}: error: cannot read file: No such file or directory"]


def test_directory_as_input(tmp_path, capsys):
    rc, out, err = _run_cli([str(tmp_path)], capsys)
    assert rc == 1 and len(err.splitlines()) == 1 and "error: cannot read file" in err


def test_non_utf8_file(tmp_path, capsys):
    path = tmp_path / "bin.hlo"
    path.write_bytes(b"HloModule m\n\nENTRY main {\n  ROOT p = f32[] param\xff\xfeeter(0)\n}\n")
    rc, out, err = _run_cli([str(path)], capsys)
    assert rc == 1 and out == ""
    assert err.splitlines() == [f"{path}:4:23: error: file is not UTF-8 text (byte 0xff)"]


def test_binary_garbage(tmp_path, capsys):
    import random

    rng = random.Random(1234)
    for i in range(20):
        path = tmp_path / f"garbage{i}.hlo"
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 2000)))
        path.write_bytes(data)
        rc, out, err = _run_cli([str(path)], capsys)
        assert rc == 1 and out == "", err
        assert len(err.splitlines()) == 1, err
        assert re.match(re.escape(str(path)) + r"(:\d+:\d+)?: error: ", err), err


def test_printable_garbage(tmp_path, capsys):
    """Random printable text (valid UTF-8) always gives a located parse error."""
    import random

    rng = random.Random(99)
    alphabet = 'HloModule ENTRY ROOT {}()[],=%:f32 s32 add parameter constant 0123456789\n\t"/*-'
    for i in range(50):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 300)))
        path = tmp_path / f"g{i}.hlo"
        path.write_text(text)
        rc, out, err = _run_cli([str(path)], capsys)
        assert rc == 1, text
        assert re.fullmatch(re.escape(str(path)) + r":\d+:\d+: error: [^\n]+\n", err), (text, err)


def test_split_input_file_error_lines(tmp_path, capsys):
    """With --split-input-file, line numbers stay those of the whole file."""
    good = "HloModule a\n\nENTRY main {\n  ROOT p = f32[] parameter(0)\n}\n"
    bad = "HloModule b\n\nENTRY main {\n  ROOT p = f32[] frob(0)\n}\n"
    path = tmp_path / "split.hlo"
    path.write_text(good + "// -----\n" + bad)
    rc, out, err = _run_cli([str(path), "--split-input-file"], capsys)
    assert rc == 1
    assert err.splitlines() == [f"{path}:10:18: error: unknown opcode 'frob'"]


# --- `-o` never destroys anything on failure -----------------------------------------------


BAD = CASES[0]


def test_failed_run_keeps_existing_output(tmp_path, capsys):
    src = tmp_path / "bad.hlo"
    src.write_text(BAD.text)
    out = tmp_path / "out.hlo"
    out.write_text("precious\n")
    rc, _, err = _run_cli([str(src), "-o", str(out)], capsys)
    assert rc == 1 and err.count("\n") == 1
    assert out.read_text() == "precious\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.hlo", "out.hlo"]  # no temp left


def test_failed_run_in_place_keeps_input(tmp_path, capsys):
    src = tmp_path / "bad.hlo"
    src.write_text(BAD.text)
    rc, _, _ = _run_cli([str(src), "-o", str(src)], capsys)
    assert rc == 1
    assert src.read_text() == BAD.text
    assert [p.name for p in tmp_path.iterdir()] == ["bad.hlo"]


def test_failed_split_run_keeps_output(tmp_path, capsys):
    """A later chunk failing must not leave the earlier chunks' output behind."""
    good = "HloModule a\n\nENTRY main {\n  ROOT p = f32[] parameter(0)\n}\n"
    src = tmp_path / "split.hlo"
    src.write_text(good + "// -----\n" + BAD.text)
    out = tmp_path / "out.hlo"
    out.write_text("precious\n")
    rc, _, _ = _run_cli([str(src), "--split-input-file", "-o", str(out)], capsys)
    assert rc == 1
    assert out.read_text() == "precious\n"


def test_unwritable_output_is_one_line(tmp_path, capsys):
    src = tmp_path / "ok.hlo"
    src.write_text("HloModule m\n\nENTRY main {\n  ROOT p = f32[] parameter(0)\n}\n")
    for target in (tmp_path / "no" / "such" / "dir.hlo", tmp_path):
        rc, out, err = _run_cli([str(src), "-o", str(target)], capsys)
        assert rc == 1 and out == ""
        assert err.splitlines() == [
            f"{target}: error: cannot write output: " + err.split(": ")[-1].strip()
        ]
    assert src.read_text().startswith("HloModule m")


def test_successful_run_replaces_output(tmp_path, capsys):
    src = tmp_path / "ok.hlo"
    src.write_text("HloModule m\n\nENTRY main {\n  ROOT p = f32[] parameter(0)\n}\n")
    out = tmp_path / "out.hlo"
    out.write_text("old\n")
    rc, _, err = _run_cli([str(src), "-o", str(out)], capsys)
    assert rc == 0, err
    assert out.read_text().startswith("HloModule m")


# --- a real process: exit status and no traceback ------------------------------------------

_SUBPROCESS_CASES = ["truncated", "unknown_opcode", "add_shape_mismatch", "nul_byte", "too_deep"]


@pytest.mark.parametrize("case_id", _SUBPROCESS_CASES)
def test_subprocess(case_id: str, tmp_path):
    case = next(c for c in CASES if c.id == case_id)
    path = tmp_path / "bad.hlo"
    path.write_bytes(_case_text(case).encode("utf-8"))
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "hlopass.commands.cli", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(f"{path}:"), proc.stderr


def test_subprocess_stdin_not_utf8():
    proc = subprocess.run(
        [sys.executable, "-m", "hlopass.commands.cli", "-"],
        input=b"HloModule m\n\xff\xfe\n",
        capture_output=True,
        timeout=120,
        env=dict(os.environ, PYTHONIOENCODING="utf-8", LC_ALL="C.UTF-8"),
    )
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 1, err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err


# --- every command, every bad input: one line, the exit code, no traceback ------------------
#
# The same bad modules go through `hlopass-opt`, `hlopass run`, `hlopass cost` and
# `hlopass rank` (in-process, through `hlopass.commands.cli.main` as the console scripts call it);
# further rows cover what only some commands read (xDSL IR, .npz inputs, usage).

from pathlib import Path  # noqa: E402

from hlopass.commands.cli import main  # noqa: E402

GOOD = "HloModule ok\n\nENTRY main {\n  ROOT p = f32[4] parameter(0)\n}\n"
_ONE_LINE = re.compile(r"\S[^\n]*: error: [^\n]+\n")

# Modules found by fuzzing and by new users (issue 12; ../shared/repros has the originals).
EXTRA_MODULES = {
    "concat_empty_dims": H + "ENTRY main {\n  a = f32[4,8] parameter(0)\n"
    "  ROOT c = f32[8,8] concatenate(a, a), dimensions={}\n}\n",
    "c64_bad_literal": H + "ENTRY main {\n  ROOT c = c64[] constant((0], 1))\n}\n",
    "c64_bad_literal2": H + "ENTRY main {\n  ROOT c = c64[2] constant({(2.02.0, 0), (0, 2)})\n}\n",
    "c64_garbage_between": H + "ENTRY main {\n  ROOT c = c64[2] constant({(1, 2) x (3, 4)})\n}\n",
    "negative_bound": H + "ENTRY main {\n  ROOT c = s8[<=-1] constant(1)\n}\n",
    "name_is_type": H + "ENTRY e {\n  u2 = s32[2] parameter(0)\n  ROOT r = s32[2] negate(u2)\n}\n",
    "name_is_type_sigil": H + "ENTRY e {\n  %f32 = s32[2] parameter(0)\n"
    "  ROOT r = s32[2] negate(%f32)\n}\n",
    "pad_result_shape": H + "ENTRY e {\n  c = f32[6] parameter(0)\n  z = f32[] constant(-1)\n"
    "  ROOT a = f32[7] pad(c, z), padding=-1_-2_1\n}\n",
    "reduce_result_shape": H + ADD + "ENTRY e {\n  p = f32[4,3] parameter(0)\n"
    "  z = f32[] constant(0)\n  ROOT r = f32[4] reduce(p, z), dimensions={0}, to_apply=add\n}\n",
    "reduce_dim_out_of_range": H + ADD + "ENTRY e {\n  p = f32[4,3] parameter(0)\n"
    "  z = f32[] constant(0)\n  ROOT r = f32[4] reduce(p, z), dimensions={2}, to_apply=add\n}\n",
    "dot_contracting_huge": H
    + "ENTRY e {\n  a = f32[4,8] parameter(0)\n  b = f32[8,3] parameter(1)\n"
    "  ROOT d = f32[4,3] dot(a, b), lhs_contracting_dims={9223372036854775808}, "
    "rhs_contracting_dims={0}\n}\n",
    "dot_contracting_sizes": H
    + "ENTRY e {\n  a = f32[4,8] parameter(0)\n  b = f32[7,3] parameter(1)\n"
    "  ROOT d = f32[4,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
    "dot_no_contracting": H + "ENTRY e {\n  a = s8[8] parameter(0)\n  b = s16[8] parameter(1)\n"
    "  ROOT d = s32[8] dot(a, b)\n}\n",
    "concat_dynamic_operand": H
    + "ENTRY e {\n  a = f32[200] parameter(0)\n  b = f32[400] parameter(1)\n"
    "  c = f32[<=0] parameter(2)\n  ROOT r = f32[900] concatenate(a, b, c), dimensions={0}\n}\n",
    "conv_result_shape": H
    + "ENTRY e {\n  i = f32[8,4,1] parameter(0)\n  k = f32[3,1,2] parameter(1)\n"
    "  ROOT c = f32[8,4,2] convolution(i, k), window={size=3}, dim_labels=b0f_0io->b0f\n}\n",
}


def _bad_modules() -> dict[str, bytes]:
    out = {c.id: _case_text(c).encode("utf-8") for c in CASES}
    out.update({k: v.encode("utf-8") for k, v in EXTRA_MODULES.items()})
    out["not_utf8"] = GOOD.replace("parameter", "param\xff\xfeeter").encode("latin-1")
    out["xdsl_empty_module"] = b"builtin.module {}\n"
    out["xdsl_parse_error"] = b'builtin.module {\n  "hlo.computation"() <{sym_name = }> ({\n'
    # 40 spaces then an unterminated string: xDSL's own lexer would backtrack for ages
    out["xdsl_unterminated_string"] = (
        b'builtin.module attributes {sym_name = "m", hlo.x = #hlo.shapes<"{f32[50,49]' + b" " * 40
    )
    out["xdsl_undefined_callee"] = (
        b'builtin.module {\n  "hlo.computation"() <{sym_name = "main", is_entry}> ({\n'
        b'    %0 = "hlo.parameter"() <{name = "p", number = #hlo.int<"0">}> : () -> !hlo.shape<"f32[4]">\n'
        b'    %1 = "hlo.constant"() <{name = "c", value = #hlo.constant<"f32[] 0">}> : () -> !hlo.shape<"f32[]">\n'
        b'    %2 = "hlo.reduce"(%0, %1) <{name = "r", dimensions = #hlo.ints<"{0}">, to_apply = @nope}>'
        b' : (!hlo.shape<"f32[4]">, !hlo.shape<"f32[]">) -> !hlo.shape<"f32[]">\n'
        b'    "hlo.return"(%2) : (!hlo.shape<"f32[]">) -> ()\n  }) : () -> ()\n}\n'
    )
    out["xdsl_parameter_without_number"] = (
        b'builtin.module {\n  "hlo.computation"() <{sym_name = "main", is_entry}> ({\n'
        b'    %0 = "hlo.parameter"() <{name = "p"}> : () -> !hlo.shape<"f32[]">\n'
        b'    "hlo.return"(%0) : (!hlo.shape<"f32[]">) -> ()\n  }) : () -> ()\n}\n'
    )
    return out


BAD_MODULES = _bad_modules()
COMMANDS = ("opt", "run", "cost", "rank", "viz")


def _check_one_line(rc: int, err: str, want_rc: int = 1) -> None:
    assert rc == want_rc, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert _ONE_LINE.fullmatch(err), repr(err)


def test_enough_bad_modules():
    assert len(BAD_MODULES) >= 40


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", sorted(BAD_MODULES))
def test_every_command_one_line(command: str, name: str, tmp_path, capsys):
    path = tmp_path / f"{name}.hlo"
    path.write_bytes(BAD_MODULES[name])
    good = tmp_path / "good.hlo"
    good.write_text(GOOD)
    argv = {
        "opt": ["opt", str(path)],
        "run": ["run", str(path)],
        "cost": ["cost", str(path)],
        "rank": ["rank", str(good), str(path)],
        "viz": ["viz", str(path), "--format", "dot"],
    }[command]
    rc = main(argv)
    out, err = capsys.readouterr()
    _check_one_line(rc, err)
    assert err.startswith(str(path)), err
    assert out == ""


def test_xdsl_error_has_xdsls_own_place(tmp_path, capsys):
    path = tmp_path / "bad.mlir"
    path.write_bytes(BAD_MODULES["xdsl_parse_error"])
    rc = main(["opt", str(path)])
    _, err = capsys.readouterr()
    _check_one_line(rc, err)
    assert err.startswith(f"{path}:2:"), err  # not 1:1
    assert "  " not in err.split("error:")[1].strip(), err  # no padding from xDSL's context


def test_xdsl_opt_wrapped_split_modules(tmp_path, capsys):
    """`hlopass-opt X --split-input-file --emit xdsl | xdsl-opt | hlopass-opt -`: xdsl-opt
    wraps the chunks in an outer module; each inner one is a module again."""
    src = tmp_path / "split.hlo"
    src.write_text(GOOD + "// -----\n" + GOOD.replace("ok", "ok2"))
    assert main(["opt", str(src), "--split-input-file", "--emit", "xdsl"]) == 0
    printed = capsys.readouterr().out
    chunks = printed.split("// -----\n")
    wrapped = "builtin.module {\n" + "".join(chunks) + "}\n"
    path = tmp_path / "wrapped.mlir"
    path.write_text(wrapped)
    assert main(["opt", str(path)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert out.count("HloModule ok") == 2 and "HloModule ok2" in out


# --- hlopass run: inputs --------------------------------------------------------------------

_TWO = "HloModule m\n\nENTRY e {\n  a = f32[4] parameter(0)\n  b = s32[2] parameter(1)\n  ROOT r = f32[4] negate(a)\n}\n"


def _npz(path: Path, **arrays) -> str:
    import numpy as np

    np.savez(path, **{k: np.asarray(v) for k, v in arrays.items()})
    return str(path)


def _run_input_cases(tmp: Path) -> dict[str, tuple[list[str], str]]:
    import numpy as np

    f32, s32 = np.ones(4, np.float32), np.ones(2, np.int32)
    npy = tmp / "one.npy"
    np.save(npy, f32)
    return {
        "wrong_keys": ([_npz(tmp / "k.npz", x=f32, y=s32)], "holds x, y; the entry computation takes in0: f32[4], in1: s32[2]"),
        "missing_key": ([_npz(tmp / "m.npz", in0=f32)], "holds in0; the entry computation takes in0: f32[4], in1: s32[2]"),
        "f64_for_f32": ([_npz(tmp / "d.npz", in0=f32.astype(np.float64), in1=s32)], "argument 0 (parameter a) is f64[4], expected f32[4]"),
        "f32_for_s32": ([_npz(tmp / "e.npz", in0=f32, in1=s32.astype(np.float32))], "argument 1 (parameter b) is f32[2], expected s32[2]"),
        "wrong_shape": ([_npz(tmp / "s.npz", in0=np.ones(5, np.float32), in1=s32)], "has shape [5], expected f32[4]"),
        "npy_not_npz": ([str(npy)], "not an .npz file"),
        "text_not_npz": ([str(tmp / "two.hlo")], "not an .npz file"),
        "missing_file": ([str(tmp / "nope.npz")], "cannot read inputs: No such file or directory"),
        "directory": ([str(tmp)], "cannot read inputs: Is a directory"),
        "no_inputs_given": ([], "the entry computation takes in0: f32[4], in1: s32[2]"),
    }  # fmt: skip


@pytest.mark.parametrize(
    "case",
    ["wrong_keys", "missing_key", "f64_for_f32", "f32_for_s32", "wrong_shape", "npy_not_npz",
     "text_not_npz", "missing_file", "directory", "no_inputs_given"],
)  # fmt: skip
def test_run_inputs_one_line(case: str, tmp_path, capsys):
    module = tmp_path / "two.hlo"
    module.write_text(_TWO)
    inputs, message = _run_input_cases(tmp_path)[case]
    argv = ["run", str(module)] + (["--inputs", inputs[0]] if inputs else [])
    rc = main(argv)
    out, err = capsys.readouterr()
    _check_one_line(rc, err)
    assert message in err, err
    assert out == ""


# --- usage errors: one line, exit 2 --------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [[], ["frob"], ["opt", "--emit", "json", "x.hlo"], ["run"], ["run", "x", "--bogus"],
     ["cost"], ["cost", "x.hlo", "--device", "tpu"], ["rank"], ["opt", "-p"]],
)  # fmt: skip
def test_usage_errors_one_line_exit_2(argv: list[str], capsys):
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse exits through SystemExit
        rc = e.code
    out, err = capsys.readouterr()
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and "error:" in err and "Traceback" not in err, err


# --- a real process: Ctrl-C and a closed pipe ------------------------------------------------


def _spawn(args: list[str], **kw) -> subprocess.Popen:
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    code = "import sys; from hlopass.commands.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env, **kw)


_FOREVER = """HloModule m

cond {
  s = s32[] parameter(0)
  ROOT c = pred[] constant(true)
}

body {
  s = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT n = s32[] add(s, one)
}

ENTRY e {
  z = s32[] constant(0)
  ROOT w = s32[] while(z), condition=cond, body=body
}
"""


@pytest.mark.parametrize("command", ["run", "cost"])
def test_ctrl_c_exits_130_with_one_line(command: str, tmp_path):
    import signal
    import time

    path = tmp_path / "forever.hlo"
    path.write_text(_FOREVER)
    # run: a loop that never ends; cost: waiting on stdin that never closes
    args = [command, str(path)] if command == "run" else [command, "-"]
    proc = _spawn(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                  preexec_fn=sigint_default)  # fmt: skip
    try:
        time.sleep(4)  # past the imports, into the loop / the read
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # never leave the endless loop running
            proc.kill()
            proc.wait()
    text = err.decode()
    assert proc.returncode == 130, text
    assert "Traceback" not in text and text.endswith(": error: interrupted\n"), text
    assert len(text.splitlines()) == 1, text


def _wide_module(n: int) -> str:
    lines = [f"  k{i} = f32[] constant({i})" for i in range(n)]
    names = ", ".join(f"k{i}" for i in range(n))
    shape = ", ".join(["f32[]"] * n)
    return (
        "HloModule m\n\nENTRY e {\n"
        + "\n".join(lines)
        + f"\n  ROOT t = ({shape}) tuple({names})\n}}\n"
    )


@pytest.mark.parametrize("command", ["run", "cost"])
def test_closed_pipe_is_quiet(command: str, tmp_path):
    """`hlopass run|cost ... | head -1`: the reader goes away; no traceback, no noise."""
    path = tmp_path / "wide.hlo"
    path.write_text(_wide_module(4000) if command == "run" else _many_kernels(3000))
    proc = _spawn([command, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.close()  # as `head -1` does
    _, err = proc.communicate(timeout=120)
    assert err.decode() == ""
    assert proc.returncode == 141  # 128 + SIGPIPE, as a shell reports for `yes | head -1`


def _many_kernels(n: int) -> str:
    lines = ["  p = f32[64] parameter(0)"]
    prev = "p"
    for i in range(n):
        lines.append(f"  e{i} = f32[64] exponential({prev})")
        prev = f"e{i}"
    return (
        "HloModule m\n\nENTRY e {\n"
        + "\n".join(lines)
        + f"\n  ROOT r = f32[64] negate({prev})\n}}\n"
    )


# --- the Python API: only HloError subclasses ----------------------------------------------


def test_api_entries_raise_hlo_errors(tmp_path):
    import numpy as np

    import hlopass
    from hlopass.cost import estimate
    from hlopass.pipeline import run_pipeline

    with pytest.raises(HloParseError):
        hlopass.parse_hlo(EXTRA_MODULES["c64_bad_literal"], "x.hlo")
    module = hlopass.parse_hlo(_TWO)
    with pytest.raises(
        hlopass.HloInputError,
        match=r"takes 2 argument\(s\) \(in0: f32\[4\], in1: s32\[2\]\), got 1",
    ):
        hlopass.evaluate(module, np.zeros(4, np.float32))
    with pytest.raises(hlopass.HloInputError):
        hlopass.evaluate(module, np.zeros(4, np.float64), np.zeros(2, np.int32))
    bad = tmp_path / "bin.hlo"
    bad.write_bytes(BAD_MODULES["not_utf8"])
    with pytest.raises(hlopass.HloError, match="not UTF-8"):
        estimate(bad)
    with pytest.raises(HloParseError):
        estimate(EXTRA_MODULES["pad_result_shape"])
    for spec in ("no-such-pass", "dce{bogus=1}", "fixpoint{passes=}"):
        with pytest.raises(hlopass.HloError):
            run_pipeline(hlopass.parse_hlo(_TWO), spec)


def test_real_xdsl_opt_pipeline_rewrites_every_wrapped_module(tmp_path):
    """`hlopass-opt X --split-input-file --emit xdsl | xdsl-opt -p algsimp | hlopass-opt -`:
    xdsl-opt wraps the modules in an outer one; the pass must still rewrite each of them
    (it once ran on the outer module only, which has no computations: nothing changed)."""
    import shutil

    xdsl_opt = shutil.which("xdsl-opt", path=str(Path(sys.executable).parent)) or shutil.which(
        "xdsl-opt"
    )
    if xdsl_opt is None:
        pytest.skip("xdsl-opt is not installed")
    src = tmp_path / "two.hlo"
    add0 = "  z = f32[4] constant({0, 0, 0, 0})\n  ROOT r = f32[4] add(p, z)\n}\n"
    src.write_text(
        "HloModule a\n\nENTRY e {\n  p = f32[4] parameter(0)\n" + add0 + "// -----\n"
        "HloModule b\n\nENTRY e {\n  p = f32[4] parameter(0)\n" + add0
    )
    emit = _spawn(["opt", str(src), "--split-input-file", "--emit", "xdsl"],
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    xdsl_text, err = emit.communicate(timeout=120)
    assert emit.returncode == 0, err
    run = subprocess.run([xdsl_opt, "-p", "algsimp"], input=xdsl_text, capture_output=True,
                         timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    back = _spawn(["opt", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                  stderr=subprocess.PIPE)  # fmt: skip
    out, err = back.communicate(run.stdout, timeout=120)
    assert back.returncode == 0, err
    text = out.decode()
    assert text.count("HloModule") == 2 and "add(" not in text, text
    assert text.count("ROOT %p = f32[4]{0} parameter(0)") == 2, text


# --- string escapes: XLA's lexer applies absl::CUnescape to every string ------------------

ESCAPES = {  # escape in a string -> accepted by XLA's parser (checked by the test below)
    "\\n": True, '\\"': True, "\\\\": True, "\\?": True, "\\'": True, "\\377": True,
    "\\0": True, "\\x41": True, "\\X4a": True, "\\u00e9": True, "\\U0001F600": True,
    "\\m": False, "\\e": False, "\\400": False, "\\x100": False, "\\x": False,
    "\\u12": False, "\\ud800": False, "\\U00110000": False, "\\/": False,
}  # fmt: skip


def _escape_module(escape: str) -> str:
    return (
        "HloModule m\n\nENTRY e {\n  p = f32[2] parameter(0), "
        f'metadata={{op_name="a{escape}z"}}\n  ROOT r = f32[2] negate(p)\n}}\n'
    )


@pytest.mark.parametrize("escape", list(ESCAPES))
def test_string_escapes_as_xla_reads_them(escape: str):
    """A malformed escape (`"\\main"`, found by the fuzzer: XLA rejects it, hlopass kept it)
    is one error at the backslash; the others are read."""
    text = _escape_module(escape)
    if ESCAPES[escape]:
        parse_hlo(text, "esc.hlo")
        return
    with pytest.raises(HloParseError, match="invalid escape in a string") as info:
        parse_hlo(text, "esc.hlo")
    assert (info.value.line, info.value.col) == (4, text.split("\n")[3].index("\\") + 1)


def test_string_escape_table_matches_xla(xla):
    got = {e: xla.accepts(_escape_module(e))[0] for e in ESCAPES}
    assert got == ESCAPES


def test_unicode_escapes_read_as_xla_reads_them(xla):
    """`\\u00e9` is é (XLA prints its UTF-8 bytes in octal); it once stayed `\\u00e9`."""
    from hlopass.text.parse_values import unescape

    assert unescape('"\\u00e9\\U0001F600\\x41\\101"') == "\u00e9\U0001f600AA"
    assert unescape('"\\303\\251"') == "\u00e9"  # what XLA prints for it
    assert "\\303\\251" in xla.reprint(_escape_module("\\u00e9"))


def test_random_inputs_for_an_unbounded_dimension_is_one_error():
    """`f32[?,4]` has no size to draw (XLA's verifier rejects unbounded dynamism): one
    HloInputError line naming the parameter, not numpy's "negative dimensions"."""
    import hlopass
    from hlopass.errors import HloInputError

    m = hlopass.parse_hlo(
        "HloModule m\nENTRY e {\n  p = f32[?,4] parameter(0)\n  ROOT n = f32[?,4] negate(p)\n}\n"
    )
    with pytest.raises(HloInputError) as e:
        hlopass.random_inputs(m)
    msg = str(e.value)
    assert msg.startswith("error: parameter 0 (f32[?,4]") and "unbounded" in msg
    assert len(msg.splitlines()) == 1
