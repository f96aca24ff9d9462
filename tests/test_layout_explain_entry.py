"""`layout-assignment` on a module without `entry_computation_layout` (hand-written HLO):
the entry's parameter and result layouts are the pass's to choose, and `--explain-layout`
(`explain=true`) says so in one line naming what it chose; `--list-passes` and
`--help-pass` say it too. The explanation changes no layout."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from hlopass import parse_hlo, print_hlo
from hlopass.dialects.hlo import entry_computation
from hlopass.pipeline import run_pipeline

OPT = str(Path(sys.executable).parent / "hlopass-opt")

# An f32 convolution in NCHW: on H100 XLA's rule wants NHWC ({1,3,2,0}) operands and
# result (lit_tests/passes/layout-assignment-explain.hlo, RULES: copies to {1,3,2,0} where
# the entry layout is pinned); free parameters take it directly.
FREE_CONV = """HloModule free_conv

ENTRY e {
  x = f32[8,16,32,32] parameter(0)
  w = f32[16,16,3,3] parameter(1)
  b = f32[16] parameter(2)
  c = f32[8,16,32,32] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01
  bb = f32[8,16,32,32] broadcast(b), dimensions={1}
  ROOT r = f32[8,16,32,32] add(c, bb)
}
"""
PINNED_CONV = FREE_CONV.replace(
    "HloModule free_conv",
    "HloModule free_conv, entry_computation_layout={(f32[8,16,32,32]{3,2,1,0}, "
    "f32[16,16,3,3]{3,2,1,0}, f32[16]{0})->f32[8,16,32,32]{3,2,1,0}}",
)
NOTE = re.compile(
    r"layout entry (\S+): the module has no entry_computation_layout, so the parameter and "
    r"result layouts were free; chosen: \((.*)\) -> (.*)"
)


def _note(err: str) -> re.Match[str]:
    found = [m for m in map(NOTE.fullmatch, err.splitlines()) if m is not None]
    assert len(found) == 1, err
    return found[0]


def test_free_entry_layouts_are_named(capsys):
    module = parse_hlo(FREE_CONV)
    run_pipeline(module, "layout-assignment{explain=true}")
    m = _note(capsys.readouterr().err)
    assert m.group(1) == "e"
    assert m.group(2) == (
        "x f32[8,16,32,32]{1,3,2,0} (was {3,2,1,0}), w f32[16,16,3,3]{1,3,2,0} "
        "(was {3,2,1,0}), b f32[16]{0}"
    )
    assert m.group(3) == "r f32[8,16,32,32]{1,3,2,0} (was {3,2,1,0})"
    # what it names is what the module now holds: no copy, the parameters relaid out
    entry = entry_computation(module)
    assert [p.shape.text() for p in entry.parameters()] == [
        "f32[8,16,32,32]{1,3,2,0}",
        "f32[16,16,3,3]{1,3,2,0}",
        "f32[16]{0}",
    ]
    assert entry.root.shape.text() == "f32[8,16,32,32]{1,3,2,0}"
    assert not any(op.opcode == "copy" for op in entry.instructions)


def test_unmoved_layouts_are_shown_without_a_was(capsys):
    text = """HloModule plain

ENTRY main {
  t = (f32[4,3], s32[2]) parameter(0)
  a = f32[4,3] get-tuple-element(t), index=0
  ROOT n = f32[4,3] negate(a)
}
"""
    run_pipeline(parse_hlo(text), "layout-assignment{explain=true}")
    m = _note(capsys.readouterr().err)
    assert m.group(1) == "main"
    assert m.group(2) == "t (f32[4,3]{1,0}, s32[2]{0})" and m.group(3) == "n f32[4,3]{1,0}"


def test_pinned_entry_or_no_explain_says_nothing(capsys):
    run_pipeline(parse_hlo(PINNED_CONV), "layout-assignment{explain=true}")
    err = capsys.readouterr().err
    assert "layout cluster 0 in e" in err and "entry_computation_layout" not in err
    run_pipeline(parse_hlo(FREE_CONV), "layout-assignment")
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("policy", ["xla", "cost", "grappler"])
def test_explaining_changes_no_layout(capsys, policy):
    quiet, told = parse_hlo(FREE_CONV), parse_hlo(FREE_CONV)
    run_pipeline(quiet, f"layout-assignment{{policy={policy}}}")
    run_pipeline(told, f"layout-assignment{{policy={policy} explain=true}}")
    assert print_hlo(told) == print_hlo(quiet)
    _note(capsys.readouterr().err)


def test_cli_explain_layout_and_pass_docs_name_the_free_entry(tmp_path):
    src = tmp_path / "free.hlo"
    src.write_text(FREE_CONV)
    run = subprocess.run([OPT, str(src), "-p", "layout-assignment", "--explain-layout"],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    m = _note(run.stderr)
    # the printed module's ENTRY takes what the line names
    assert "%x = f32[8,16,32,32]{1,3,2,0} parameter(0)" in run.stdout
    assert m.group(3).startswith("r f32[8,16,32,32]{1,3,2,0}")
    listed = subprocess.run([OPT, "--list-passes"], capture_output=True, text=True, timeout=120)
    block = listed.stdout.split("\nlayout-assignment: ", 1)[1].split("\nlayout-normalization", 1)[0]
    assert "entry_computation_layout" in " ".join(block.split())
    helped = subprocess.run([OPT, "--help-pass", "layout-assignment"], capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert "hand-written HLO" in " ".join(helped.stdout.split())
