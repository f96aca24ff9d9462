"""XLA's own hlo-opt FileCheck tests for the passes we implement, run through our passes.

Every `xla_tests/*.hlo` of the corpus is scanned for `RUN:` lines that invoke `hlo-opt`
with a pass list (`--passes=...`, `-p ...`, or `$(hlo-opt --list-passes)`). A *case* is one
module (one `// -----` chunk under `--split-input-file`) with one FileCheck prefix whose
input is hlo-opt's output (piped, or the `after_optimization.txt` dump it wrote).

* claimed: every pass of the RUN line is one of ours (algsimp, dce, cse,
  constant-folding): the CHECK lines must hold on our output.
* not claimed (listed with the reason): a pass we do not have, or a check of something
  other than the passes (e.g. the dump printer's large-constant elision). Those whose
  passes include some of ours are still run through that subset, for the report.

The summary (`held / total`) is printed by `test_xla_check_summary` (`pytest -s`).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from hlopass.errors import HloShapeError
from hlopass.pipeline import PASSES, run_pipeline
from hlopass.text.exporter import print_hlo
from hlopass.text.importer import parse_hlo
from tests.conftest import CORPUS

# XLA's pass names (as hlo-opt registers them) -> ours
XLA_NAMES = {
    "algsimp": "algsimp",
    "dce": "dce",
    "hlo-dce": "dce",
    "cse": "cse",
    "hlo-cse": "cse",
    "constant_folding": "constant-folding",
    "constant-folding": "constant-folding",
    "hlo-constant-folding": "constant-folding",
}
VARIANTS = {"test-only-algebraic-simplifier-with-onednn-enabled": "algsimp"}
"""XLA variants of our passes: not claimed, run through ours for the report only."""
ALL_OURS = ("algsimp", "constant-folding", "dce", "cse")
"""What `--passes=$(hlo-opt --list-passes)` runs here: all of our passes."""


@dataclass(frozen=True)
class Case:
    file: str
    run: int  # index of the hlo-opt RUN command in the file
    chunk: int  # `// -----` chunk (0 without --split-input-file)
    prefix: str
    xla_passes: tuple[str, ...]
    reason: str  # why it is not claimed; "" when claimed

    @property
    def ours(self) -> tuple[str, ...]:
        """Our passes for its pass list (for cases not claimed: the part we have)."""
        names = {**XLA_NAMES, **VARIANTS}
        return tuple(names[p] for p in self.xla_passes if p in names)

    @property
    def claimed(self) -> bool:
        return not self.reason

    @property
    def id(self) -> str:
        return f"{self.file.removesuffix('.hlo')}:run{self.run}:{self.prefix}#{self.chunk}"


def _run_commands(text: str) -> list[str]:
    """The RUN commands of a test file, continuation lines (`\\`) joined."""
    out: list[str] = []
    pending = ""
    for line in text.splitlines():
        m = re.match(r"^\s*//\s*RUN:(.*)$", line)
        if not m:
            continue
        part = m.group(1).strip()
        if part.endswith("\\"):
            pending += part[:-1] + " "
            continue
        out.append(pending + part)
        pending = ""
    if pending:
        out.append(pending)
    return out


def _pass_list(cmd: str) -> tuple[str, ...] | None:
    """The passes an `hlo-opt` command runs, None when it runs no pass list."""
    if "--list-passes" in cmd and "--passes=$PASSES" in cmd.replace('"', ""):
        return ("$(hlo-opt --list-passes)",)
    m = re.search(r"(?:--passes[= ]|(?<![\w-])-p )\s*(\"[^\"]*\"|'[^']*'|\S+)", cmd)
    if m is None:
        return None
    return tuple(p for p in m.group(1).strip("\"'").split(",") if p)


def _prefixes(filecheck_cmd: str) -> list[str]:
    m = re.search(r"--?check-prefix(?:es)?[= ](\"[^\"]*\"|\S+)", filecheck_cmd)
    return m.group(1).strip("\"'").split(",") if m else ["CHECK"]


def _chunks(text: str, split: bool) -> list[str]:
    return re.split(r"(?m)^// -----.*$", text) if split else [text]


def _has_prefix(chunk: str, prefix: str) -> bool:
    return re.search(rf"(?m)//\s*{re.escape(prefix)}(-NEXT|-LABEL|-SAME|-NOT|-DAG|-COUNT-\d+)?:",
                     chunk) is not None  # fmt: skip


def _hlo_opt_commands(text: str) -> list[str]:
    return [c for c in _run_commands(text) if re.search(r"(^|[\s;|(])hlo-opt\s", c)]


def cases_of(name: str, text: str) -> list[Case]:
    """The FileCheck cases of one xla_tests file whose hlo-opt run has a pass list."""
    cmds = _run_commands(text)
    out: list[Case] = []
    run = -1
    for i, cmd in enumerate(cmds):
        if not re.search(r"(^|[\s;|(])hlo-opt\s", cmd):
            continue
        run += 1
        passes = _pass_list(cmd)
        if passes is None:
            continue
        # where its output goes: a pipe into FileCheck, or a dump read by later RUN lines
        prefixes: list[tuple[str, str]] = []  # (prefix, extra reason)
        if "FileCheck" in cmd.split("hlo-opt", 1)[1]:
            prefixes += [(p, "") for p in _prefixes(cmd.split("FileCheck", 1)[1])]
        dump = re.search(r"--xla_dump_to=(\S+)", cmd)
        if dump:
            for later in cmds[i + 1 :]:
                if "FileCheck" not in later:
                    continue
                if re.search(rf"{re.escape(dump.group(1))}/\S*after_optimization", later):
                    prefixes += [(p, "") for p in _prefixes(later.split("FileCheck", 1)[1])]
                elif re.search(rf"{re.escape(dump.group(1))}\b", later) and "hlo-opt" not in later:
                    pass  # listings of the dump folder and debug-option dumps: not pass output
        if passes == ("$(hlo-opt --list-passes)",):
            passes = tuple(ALL_OURS)
        unknown = [p for p in passes if p not in XLA_NAMES]
        reason = ""
        if any(p in VARIANTS for p in passes):
            reason = (
                "XLA:CPU's oneDNN variant of algsimp (upcasts bf16 convolutions it cannot rewrite)"
            )
        elif unknown:
            reason = f"runs XLA pass(es) we do not implement: {', '.join(unknown)}"
        if re.search(r"--platform|--stage", cmd):
            reason = reason or "runs a backend compilation stage, not a pass list"
        split = "--split-input-file" in cmd
        for prefix, why in prefixes:
            for k, chunk in enumerate(_chunks(text, split)):
                if "HloModule" not in chunk and "ENTRY" not in chunk:
                    continue
                if not _has_prefix(chunk, prefix):
                    continue
                if not why and re.search(rf"(?m)//\s*{re.escape(prefix)}\S*:.*\{{\.\.\.\}}", chunk):
                    why = ("checks the dump printer's elision of large constants "
                           "(`constant({...})`), a print option, not a pass")  # fmt: skip
                out.append(Case(name, run, k, prefix, passes, reason or why))
    return out


@cache
def all_cases() -> tuple[Case, ...]:
    if CORPUS is None:
        return ()
    out: list[Case] = []
    for path in sorted((CORPUS / "xla_tests").glob("*.hlo")):
        text = path.read_text(errors="replace")
        if "hlo-opt" not in text:
            continue
        out += cases_of(path.name, text)
    return tuple(out)


def _filecheck(check_text: str, prefix: str, output: str, tmp: Path) -> tuple[bool, str]:
    try:
        import filecheck  # noqa: F401
    except ImportError:
        pytest.skip("the filecheck package is not installed (`test` extra)")
    check = tmp / "check.hlo"
    check.write_text(check_text)
    r = subprocess.run([sys.executable, "-m", "filecheck", str(check), f"--check-prefix={prefix}"],
                       input=output, capture_output=True, text=True)  # fmt: skip
    return r.returncode == 0, (r.stdout + r.stderr)[-3000:]


def run_case(case: Case, tmp: Path) -> tuple[bool, str]:
    """(CHECK lines hold on our output, FileCheck's message)."""
    assert CORPUS is not None
    text = (CORPUS / "xla_tests" / case.file).read_text()
    split = case.chunk > 0 or any(
        "--split-input-file" in c for c in _hlo_opt_commands(text)[case.run : case.run + 1]
    )
    chunk = _chunks(text, split)[case.chunk]
    try:
        module = parse_hlo(chunk, case.file)
    except HloShapeError as e:  # invalid for XLA's verifier too (e.g. a wrong conv shape)
        return False, f"the verifier rejects the input: {e}"
    if case.ours:
        run_pipeline(module, ",".join(case.ours), verify_each=True)
    return _filecheck(chunk, case.prefix, print_hlo(module), tmp)


def _claimed() -> list[Case]:
    return [c for c in all_cases() if c.claimed]


# --- the scanner itself -------------------------------------------------------------------


def test_run_line_scanner() -> None:
    text = (
        "// RUN: hlo-opt %s --split-input-file --passes=algsimp,cse | FileCheck %s\n"
        "// RUN: hlo-opt %s --passes=foo \\\n// RUN:   | FileCheck %s --check-prefixes=A,B\n"
        "// RUN: hlo-opt %s --xla_dump_to=%t_d --xla_dump_large_constants=true --passes=dce\n"
        "// RUN: ls %t_d | FileCheck %s --check-prefix=LS\n"
        "// RUN: cat %t_d/m.*after_optimization.txt | FileCheck %s --check-prefix=M\n"
        "// CHECK: x\n// A: y\n// B: y\n// M: z\n// LS: q\nHloModule a\nENTRY e {}\n"
        "// -----\n// CHECK: w\nHloModule b\nENTRY e {}\n"
    )
    cases = cases_of("t.hlo", text)
    got = {(c.run, c.chunk, c.prefix, c.claimed) for c in cases}
    assert got == {(0, 0, "CHECK", True), (0, 1, "CHECK", True), (1, 0, "A", False),
                   (1, 0, "B", False), (2, 0, "M", True)}  # fmt: skip
    assert cases[0].ours == ("algsimp", "cse")


def test_known_cases_are_found(corpus: Path) -> None:
    ids = {c.id for c in _claimed()}
    assert "hlo__transforms__tests__algebraic_simplifier:run0:CHECK#0" in ids
    assert any(c.file == "hlo__tools__tests__hlo_opt_dump.hlo" for c in _claimed())


# --- the cases ----------------------------------------------------------------------------


@pytest.mark.parametrize("case", _claimed() or [None], ids=[c.id for c in _claimed()] or ["none"])
def test_xla_check_lines_hold(case: Case | None, corpus: Path, tmp_path: Path) -> None:
    if case is None:
        pytest.skip("no hlo-opt test of our passes in this corpus")
    ok, msg = run_case(case, tmp_path)
    assert ok, f"{case.id} ({','.join(case.xla_passes)}):\n{msg}"


def test_xla_check_summary(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Counts held/total, claimed or not, and lists the cases not claimed with reasons."""
    cases = all_cases()
    lines = []
    held_claimed = held_other = 0
    claimed = [c for c in cases if c.claimed]
    others = [c for c in cases if not c.claimed]
    for c in claimed:
        ok, _ = run_case(c, tmp_path)
        held_claimed += ok
    unrelated: dict[str, list[Case]] = {}
    for c in others:
        if not c.ours:
            unrelated.setdefault(c.file, []).append(c)
            continue
        ok, _ = run_case(c, tmp_path)
        held_other += ok
        ran = f"{'holds' if ok else 'fails'} with our {','.join(c.ours)}"
        lines.append(f"  {c.id} [{','.join(c.xla_passes)}]: {c.reason} ({ran})")
    for file, cs in unrelated.items():
        lines.append(f"  {file}: {len(cs)} case(s): {cs[0].reason} (not run)")
    with capsys.disabled():
        print(f"\nXLA hlo-opt CHECK cases for our passes: {held_claimed}/{len(claimed)} hold "
              f"(claimed); not claimed: {len(others)} ({held_other} hold anyway)")  # fmt: skip
        for c in claimed:
            print(f"  held: {c.id} [{','.join(c.xla_passes)}]")
        print("\n".join(lines))
    assert held_claimed == len(claimed)
    assert set(PASSES) >= set(ALL_OURS)


def test_split_commands_helper() -> None:
    assert _pass_list('hlo-opt --passes="dce,algsimp" %s') == ("dce", "algsimp")
    assert _pass_list("hlo-opt -p cse %s") == ("cse",)
    assert _pass_list("hlo-opt %s --emit-proto") is None
    assert shlex.split("a 'b c'") == ["a", "b c"]
