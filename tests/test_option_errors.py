"""Pass options in users' words: every bad value is one line naming the pass, the option,
the value and what is expected (no Python type names); counts and sizes refuse negative
values, generically over every registered pass; `--list-passes` and `--help-pass` print
option help whole."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest

from hlopass.driver.pass_options import Option, OptionValueError, options_of, signed
from hlopass.pipeline import PASSES, PipelineError, parse_pass_pipeline

BIN = Path(sys.executable).parent
HLO = "HloModule m\n\nENTRY main {\n  ROOT p0 = f32[4]{0} parameter(0)\n}\n"

# Options whose meaning is a count or a size, listed by hand from the passes' sources: the
# generic discovery below must find at least these, so the checks cannot pass on nothing.
KNOWN_COUNTS = {
    ("constant-folding", "max-elements"),
    ("constant-folding", "max-loop-iterations"),
    ("constant-folding", "max-loop-elements"),
    ("fixpoint", "max-iterations"),
    ("layout-assignment", "max-trials"),
    ("priority-fusion", "max-fusions"),
    ("priority-fusion", "max-temp-bytes"),
}


def all_options() -> list[tuple[str, Option]]:
    return [(name, o) for name, load in sorted(PASSES.items()) for o in options_of(load())]


def error_of(pipeline: str) -> str:
    with pytest.raises(PipelineError) as info:
        parse_pass_pipeline(pipeline)
    text = str(info.value)
    assert "\n" not in text and "<class" not in text and "Incompatible" not in text, text
    return text


def test_every_count_option_refuses_negative_values() -> None:
    counts = [(n, o) for n, o in all_options() if o.type is int]
    assert {(n, o.name) for n, o in counts} >= KNOWN_COUNTS
    for name, o in counts:
        msg = error_of(f"{name}{{{o.name}=-5}}")
        assert msg.startswith(f"error: bad option for pass '{name}': {o.name}=-5: expected a "
                              "whole number >= 0"), msg  # fmt: skip


def test_documented_special_value_is_accepted() -> None:
    # max-fusions: "(...; -1: no limit)" in its docstring; -1 is its default
    (p,) = parse_pass_pipeline("priority-fusion{max-fusions=-1 max-temp-bytes=-1}")
    assert p.max_fusions == -1 and p.max_temp_bytes == -1
    msg = error_of("priority-fusion{max-temp-bytes=-2}")
    assert msg.endswith("max-temp-bytes=-2: expected a whole number >= 0, or -1 (no limit)")


@pytest.mark.parametrize(
    ("pipeline", "expected"),
    [
        ("algsimp{float-unsafe=maybe}", "float-unsafe=maybe: expected true or false"),
        ("algsimp{float-unsafe=1,2}", "float-unsafe=1,2: expected true or false"),
        ("dce{remove-dead-computations=1}", "remove-dead-computations=1: expected true or false"),
        ("constant-folding{max-elements=abc}", "max-elements=abc: expected a whole number >= 0"),
        ("constant-folding{max-elements=1.5}", "max-elements=1.5: expected a whole number >= 0"),
        ("constant-folding{max-elements=true}", "max-elements=true: expected a whole number >= 0"),
        ("constant-folding{max-elements}", "max-elements: needs a value (a whole number >= 0)"),
        ("fixpoint{max-iterations=x}", "max-iterations=x: expected a whole number >= 0"),
        ("cse{is-layout-sensitive=yes}", "is-layout-sensitive=yes: expected true or false"),
        ("layout-assignment{device=3}", "device=3: expected a name"),
    ],
)
def test_bad_value_in_user_words(pipeline: str, expected: str) -> None:
    name = pipeline.split("{")[0]
    assert error_of(pipeline) == f"error: bad option for pass '{name}': {expected}"


def test_every_bool_option_says_true_or_false() -> None:
    bools = [(n, o) for n, o in all_options() if o.type is bool]
    assert len(bools) >= 20
    for name, o in bools:
        assert error_of(f"{name}{{{o.name}=maybe}}").endswith(
            f"{o.name}=maybe: expected true or false"
        )


def test_threshold_may_be_negative_and_whole() -> None:
    (p,) = parse_pass_pipeline("algsimp{associative-reordering-threshold=-3}")
    assert p.associative_reordering_threshold == -3.0
    (p,) = parse_pass_pipeline("algsimp{associative-reordering-threshold=4}")
    assert p.associative_reordering_threshold == 4.0 and isinstance(
        p.associative_reordering_threshold, float
    )


def test_signed_marker() -> None:
    @dataclasses.dataclass(frozen=True)
    class Shift:
        name: ClassVar[str] = "shift"
        offset: int = signed(0)
        """How far to shift (either way)."""
        count: int = 1
        """How many times."""

    offset, count = options_of(Shift)
    assert offset.signed and offset.convert((-7,)) == (-7,)
    assert offset.expected() == "a whole number"
    with pytest.raises(OptionValueError, match="count=-1: expected a whole number >= 0"):
        count.convert((-1,))


def run(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=cwd)


def test_cli_bad_option_is_one_line(tmp_path: Path) -> None:
    src = tmp_path / "m.hlo"
    src.write_text(HLO)
    p = run([str(BIN / "hlopass-opt"), str(src), "-p", "constant-folding{max-elements=-5}"])
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.splitlines() == [
        f"{src}: error: bad option for pass 'constant-folding': max-elements=-5: "
        "expected a whole number >= 0"
    ]


@pytest.mark.parametrize("top", ["-3", "x"])
def test_cost_top_refuses_negative(tmp_path: Path, top: str) -> None:
    src = tmp_path / "m.hlo"
    src.write_text(HLO)
    p = run([str(BIN / "hlopass"), "cost", str(src), "--top", top])
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.splitlines() == [
        f"hlopass cost: error: argument --top: expected a whole number >= 0, got '{top}' "
        "(see hlopass cost --help)"
    ]


def _words(text: str) -> str:
    return " ".join(text.split())


def test_list_passes_prints_whole_first_paragraphs() -> None:
    p = run([str(BIN / "hlopass-opt"), "--list-passes"])
    assert p.returncode == 0, p.stderr
    flat = _words(p.stdout)
    for _, o in all_options():
        first = o.doc.split("\n\n")[0]
        assert _words(first) in flat, o.name
    # by hand, from passes/fusion/priority.py: the sentence the old listing cut at its line end
    assert ("max-temp-bytes=-1 Refuse a fusion that would lift a computation's peak of live "
            "intermediate bytes (hlopass.ir.memory's model, in block order) above this many bytes "
            "(-1: no limit).") in flat  # fmt: skip
    assert "--help-pass NAME" in p.stdout
    assert max(map(len, p.stdout.splitlines())) <= 100  # wrapped


def test_help_pass_prints_every_option_in_full() -> None:
    p = run([str(BIN / "hlopass-opt"), "--help-pass", "constant-folding"])
    assert p.returncode == 0, p.stderr
    flat = _words(p.stdout)
    # by hand, from passes/constant_folding.py: all three sentences of the docstring
    assert ("max-loop-iterations=1000 (a whole number >= 0) With `fold-while`: fold an "
            "instruction only if the while loops its evaluation runs (nested ones included) end "
            "within this many iterations in total. A loop that runs longer, or never ends, stays "
            "unfolded.") in flat  # fmt: skip
    assert "fold-while=false (true or false)" in flat
    bad = run([str(BIN / "hlopass-opt"), "--help-pass", "constant-foldin"])
    assert bad.returncode == 1 and len(bad.stderr.splitlines()) == 1
    assert bad.stderr.startswith(
        "hlopass-opt: error: unknown pass 'constant-foldin' (did you mean 'constant-folding'?)"
    )
