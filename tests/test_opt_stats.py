"""`hlopass-opt --stats`: what was read (counted here independently of the parser), what
ran, what was written, and the main reason the output text differs from the input."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

OPT = str(Path(sys.executable).parent / "hlopass-opt")
PREFIX = "hlopass-opt: stats: "

# XLA's default print of a module: what hlopass-opt reads and prints byte for byte.
DEFAULT = """HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

ENTRY %main (p0: f32[4]) -> f32[4] {
  %p0 = f32[4]{0} parameter(0)
  %dead = f32[4]{0} negate(%p0)
  ROOT %n = f32[4]{0} abs(%p0)
}

"""


def opt(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([OPT, *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def stats_of(stderr: str) -> list[str]:
    lines = stderr.splitlines()
    assert lines and all(ln.startswith(PREFIX) for ln in lines), stderr
    return [ln[len(PREFIX) :] for ln in lines]


def test_bert_seed_says_why_the_output_differs(corpus: Path, tmp_path: Path) -> None:
    src = corpus / "seeds" / "001_c2c20f964a2c12a7.hlo"
    text = src.read_text()
    # counted from the text: computation headers and instruction lines of the dump
    comps = len(re.findall(r"^(?:ENTRY )?%\S+ \(", text, re.M))
    instrs = len(re.findall(r"^\s+(?:ROOT )?%\S+ = ", text, re.M))
    assert (comps, instrs) == (276, 3918)
    out = tmp_path / "bert.hlo"
    plain = opt([str(src), "-o", str(tmp_path / "plain.hlo")])
    p = opt([str(src), "-o", str(out), "--stats"])
    assert p.returncode == 0 and plain.returncode == 0, p.stderr
    assert out.read_text() == (tmp_path / "plain.hlo").read_text()  # --stats changes no output
    s = stats_of(p.stderr)
    assert s[0] == (f"read {src}: {len(text.encode()):,} bytes, {text.count(chr(10)):,} lines; "
                    f"1 module(s), {comps:,} computation(s), {instrs:,} instruction(s); "
                    "print style long: the long (typed-operand) print style")  # fmt: skip
    assert s[1] == "ran no passes"
    written = out.read_text()
    assert s[2] == (f"wrote {out}: {len(written.encode()):,} bytes, {written.count(chr(10)):,} "
                    "lines, print style default")  # fmt: skip
    assert written != text
    assert s[3].startswith("the output text differs from the input: input is in the long")
    assert s[3].endswith("use --style long to keep it")
    # the seed's header has no entry_computation_layout; XLA's print adds one (checked by hand)
    assert "entry_computation_layout" not in text.splitlines()[0]
    assert any("HloModule line" in ln for ln in s[4:])


def test_equal_text_is_said(tmp_path: Path) -> None:
    src = tmp_path / "m.hlo"
    src.write_text(DEFAULT)
    p = opt([str(src), "--stats"])
    assert p.returncode == 0 and p.stdout == DEFAULT  # byte-identical, checked directly
    s = stats_of(p.stderr)
    assert s[0].endswith("1 computation(s), 3 instruction(s); print style default: "
                         "XLA's default print (`%` names, untyped operands)")  # fmt: skip
    assert s[2] == f"wrote <stdout>: {len(DEFAULT):,} bytes, 8 lines, print style default"
    assert s[-1] == "the output text equals the input text"


def test_passes_ran_and_changed(tmp_path: Path) -> None:
    src = tmp_path / "m.hlo"
    src.write_text(DEFAULT)
    p = opt([str(src), "-p", "dce,cse", "--stats", "-o", str(tmp_path / "o.hlo")])
    assert p.returncode == 0, p.stderr
    assert "negate" not in (tmp_path / "o.hlo").read_text()
    s = stats_of(p.stderr)
    assert re.fullmatch(r"ran 2 pass run\(s\) in \d+\.\d{3} s: dce \(changed, \d+\.\d{3} s\), "
                        r"cse \(no change, \d+\.\d{3} s\)", s[1]), s[1]  # fmt: skip
    assert s[3].startswith("the output text differs from the input (the passes changed the module)")
    assert s[3].endswith("because 1 input line(s) differ, e.g. `%dead = f32[4]{0} negate(%p0)` "
                         "is not in the output")  # fmt: skip


def test_short_style_input(tmp_path: Path) -> None:
    src = tmp_path / "m.hlo"
    src.write_text(
        "HloModule m\n\nENTRY main {\n  p0 = f32[4] parameter(0)\n  ROOT n = f32[4] negate(p0)\n}\n"
    )
    p = opt([str(src), "--stats", "-o", str(tmp_path / "o.hlo")])
    assert p.returncode == 0, p.stderr
    s = stats_of(p.stderr)
    assert s[0].endswith("print style short: the short print style (no `%` names)")
    assert "use --style short to keep it" in s[3]


def test_respelt_constant_is_shown(tmp_path: Path) -> None:
    src = tmp_path / "m.hlo"
    src.write_text("HloModule m, entry_computation_layout={()->f32[]}\n\n"
                   "ENTRY %main () -> f32[] {\n  ROOT %n = f32[] constant(-0)\n}\n\n")  # fmt: skip
    p = opt([str(src), "--stats"])
    assert p.returncode == 0, p.stderr
    printed = next(ln for ln in p.stdout.splitlines() if "constant(" in ln).strip()
    assert printed != "ROOT %n = f32[] constant(-0)"  # respelt (XLA prints -0.0)
    s = stats_of(p.stderr)
    assert s[-1].endswith(f"e.g. `ROOT %n = f32[] constant(-0)` printed `{printed}`"), s[-1]


def test_other_output_formats_are_named(tmp_path: Path) -> None:
    src = tmp_path / "m.hlo"
    src.write_text(DEFAULT)
    xdsl = tmp_path / "m.mlir"
    p = opt([str(src), "--emit", "xdsl", "-o", str(xdsl), "--stats"])
    assert p.returncode == 0, p.stderr
    assert xdsl.read_text().startswith("builtin.module")
    assert (
        stats_of(p.stderr)[-1]
        == "the output text differs from the input: it is xDSL IR (--emit xdsl)"
    )
    back = opt([str(xdsl), "--stats"])
    assert back.returncode == 0 and back.stdout == DEFAULT  # the module survived the trip
    assert "print style none" in stats_of(back.stderr)[0]
