"""`hlopass-opt --generate-checks`: the CHECK lines pass FileCheck on the output they came
from, still pass when every instruction is renamed (what capturing names is for), and fail
when the graph changes. Opcodes equal to instruction names (`%add = f32[] add(...)`, as XLA
names instructions) and attribute text must stay literal."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from hlopass.checking.checkgen import generate_checks

BIN = Path(sys.executable).parent
OPT = str(BIN / "hlopass-opt")
FILECHECK = str(BIN / "filecheck")

# Instructions named after opcodes (and after a called computation, `add`), a constant with
# a word literal, and a control predecessor.
MODULE = """\
HloModule m

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT add = f32[] add(x, y)
}

ENTRY main {
  p = f32[4]{0} parameter(0)
  constant = f32[] constant(3)
  constant.1 = f32[] constant(2)
  broadcast = f32[4]{0} broadcast(constant), dimensions={}
  broadcast.1 = f32[4]{0} broadcast(constant.1), dimensions={}
  add = f32[4]{0} add(p, broadcast)
  add.1 = f32[4]{0} add(add, broadcast.1)
  multiply = f32[4]{0} multiply(add.1, add)
  multiply.1 = f32[4]{0} multiply(multiply, add), control-predecessors={add.1}
  reduce = f32[] reduce(multiply.1, constant), dimensions={0}, to_apply=add
  flag = pred[] constant(true)
  ROOT tuple = (f32[4]{0}, f32[], pred[]) tuple(multiply.1, reduce, flag)
}
"""


def _opt(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([OPT, str(path), *args], capture_output=True, text=True, timeout=120)


def _filecheck(checks: str, text: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    check_file = tmp_path / "checks.txt"
    check_file.write_text(checks)
    return subprocess.run(
        [FILECHECK, str(check_file)], input=text, capture_output=True, text=True, timeout=60
    )


_HEADER = re.compile(r"^(?:ENTRY )?%?([\w.\-]+) [(]|^([\w.\-]+) \{$")
_DEFINED = re.compile(r"^(\s*(?:ROOT )?%?)([\w.\-]+)( = )")


def _rename(text: str) -> str:
    """Every instruction renamed `renamed_N` in its definition and its `%` uses, found independently
    of checkgen: a use is `%name` after `(`, `,`, `{`, `/` (of `/*index=5*/`) or a blank. Names shared with a
    computation are left alone, so a called computation is never renamed by mistake."""
    computations = {m.group(1) or m.group(2) for m in map(_HEADER.match, text.splitlines()) if m}
    out, names = [], {}
    for line in text.splitlines():
        if _HEADER.match(line):
            names = {}
        elif (d := _DEFINED.match(line)) and d.group(2) not in computations:
            names[d.group(2)] = f"renamed_{len(names)}"
        for old, new in names.items():
            line = re.sub(rf"(?<=[(,{{ /])%{re.escape(old)}(?![\w.\-])", f"%{new}", line)
        if (d := _DEFINED.match(line)) and d.group(2) in names:
            line = d.group(1) + names[d.group(2)] + line[d.end(2) :]
        out.append(line)
    return "\n".join(out) + "\n"


_TWO_OPERANDS = re.compile(r"\((%[\w.\-]+), (%[\w.\-]+)\)")


def _swap_operands(text: str) -> str:
    """The first binary instruction with two different operands, operands swapped."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _TWO_OPERANDS.search(line)
        if m and m.group(1) != m.group(2) and " = " in line:
            lines[i] = line[: m.start()] + f"({m.group(2)}, {m.group(1)})" + line[m.end() :]
            return "\n".join(lines) + "\n"
    raise AssertionError("no binary instruction with two different operands")


def test_opcodes_and_attributes_stay_literal(tmp_path):
    src = tmp_path / "m.hlo"
    src.write_text(MODULE)
    p = _opt(src, "-p", "algsimp", "--generate-checks")
    assert p.returncode == 0, p.stderr
    checks = p.stdout
    assert "= f32[] constant(2)\n" in checks  # not `[[CONSTANT]](2)`
    assert "= f32[4]{0} broadcast(%[[CONSTANT_1]]), dimensions={}" in checks
    assert "= f32[4]{0} add(%[[ADD_1]], %[[BROADCAST_1]])" in checks
    assert "multiply(%[[MULTIPLY]], %[[ADD_1]]), control-predecessors={%[[ADD_2]]}" in checks
    assert "), dimensions={0}, to_apply=%add\n" in checks  # computations stay literal
    assert "= pred[] constant(true)\n" in checks
    for line in checks.splitlines():  # no capture anywhere in opcode position
        assert not re.search(r"\]\] = \S+ \[\[", line), line


def test_names_without_sigil():
    """The `%`-less style (XLA's newer printer, hand-written tests) is captured the same way."""
    checks = generate_checks(MODULE)
    assert "// CHECK-NEXT: [[CONSTANT_1:[^ ]+]] = f32[] constant(2)" in checks
    assert "[[ADD_1_1:[^ ]+]] = f32[4]{0} add([[ADD_1]], [[BROADCAST_1]])" in checks
    assert "multiply([[MULTIPLY]], [[ADD_1]]), control-predecessors={[[ADD_1_1]]}" in checks
    assert "reduce([[MULTIPLY_1]], [[CONSTANT]]), dimensions={0}, to_apply=add" in checks
    assert "[[FLAG:[^ ]+]] = pred[] constant(true)" in checks


def test_old_style_operands_with_shapes():
    """Operands printed with their shapes (`f32[2,3]{1,0} %x`): the name is the last word."""
    text = (
        "ENTRY %e (a: f32[2,3]) -> f32[2,3] {\n"
        "  %a = f32[2,3]{1,0} parameter(0)\n"
        "  ROOT %add = f32[2,3]{1,0} add(f32[2,3]{1,0} %a, f32[2,3]{1,0} %a)\n"
        "}\n"
    )
    checks = generate_checks(text)
    assert "= f32[2,3]{1,0} add(f32[2,3]{1,0} %[[A]], f32[2,3]{1,0} %[[A]])" in checks


def test_numbered_operands_of_a_long_list():
    """The printer marks every fifth operand `/*index=5*/%x`; that name is an operand too."""
    defs = "".join(f"  %add.{i} = f32[] parameter({i})\n" for i in range(6))
    uses = ", ".join(f"%add.{i}" for i in range(5)) + ", /*index=5*/%add.5"
    text = f"ENTRY %e () -> f32[] {{\n{defs}  ROOT %t = (f32[]) tuple({uses})\n}}\n"
    checks = generate_checks(text)
    assert "%[[ADD_4]], /*index=5*/%[[ADD_5]])" in checks


def _check_round_trip(out: str, tmp_path: Path) -> None:
    checks = generate_checks(out)
    ok = _filecheck(checks, out, tmp_path)
    assert ok.returncode == 0, ok.stderr[-2000:]
    renamed = _rename(out)
    assert renamed != out
    reparsed = tmp_path / "renamed.hlo"
    reparsed.write_text(renamed)
    # the renaming kept every use: still valid HLO
    assert _opt(reparsed, "--split-input-file").returncode == 0
    ok = _filecheck(checks, renamed, tmp_path)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert _filecheck(checks, _swap_operands(out), tmp_path).returncode != 0
    dropped = "\n".join(ln for ln in out.splitlines() if " constant(" not in ln) + "\n"
    assert _filecheck(checks, dropped, tmp_path).returncode != 0


def test_checks_survive_renaming_and_catch_changes(tmp_path):
    src = tmp_path / "m.hlo"
    src.write_text(MODULE)
    p = _opt(src, "-p", "algsimp")
    assert p.returncode == 0, p.stderr
    _check_round_trip(p.stdout, tmp_path)


def test_split_input_output(tmp_path):
    """`--split-input-file` output: `// -----` stays a bare separator, not a CHECK-NEXT line
    that the blank line before it would break."""
    src = tmp_path / "m.hlo"
    src.write_text(MODULE + "\n// -----\n" + MODULE)
    p = _opt(src, "-p", "algsimp", "--split-input-file")
    assert p.returncode == 0 and "\n// -----\n" in p.stdout, p.stderr
    checks = generate_checks(p.stdout)
    assert "\n// -----\n" in checks and "CHECK-NEXT: // -----" not in checks
    _check_round_trip(p.stdout, tmp_path)


CORPUS_MODELS = [
    "attention_block", "cnn_train", "layernorm_gelu_mlp", "mlp_adam", "softmax_xent",
    "control_sort", "rnn_scan", "while_loop",
]  # fmt: skip


@pytest.mark.parametrize("model", CORPUS_MODELS)
def test_corpus_after_algsimp(corpus, model, tmp_path):
    p = _opt(corpus / "jax" / model / "before_optimizations.hlo", "-p", "algsimp")
    assert p.returncode == 0, p.stderr
    _check_round_trip(p.stdout, tmp_path)
