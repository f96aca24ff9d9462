"""`hlopass-opt --stats`: what was read, what ran, what was written, and why the output
text differs from the input where it does.

The main job prints XLA's current standard print of what it read, so an older-style dump
(typed operands: `add(f32[] %x, f32[] %y)`) comes back in a different style, computations
in XLA's order, with the module header XLA prints today: users see a large diff and no
word why. This says it on stderr, one `hlopass-opt: stats:` line per fact.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, TextIO

STYLES = {
    "long": "the long (typed-operand) print style",
    "default": "XLA's default print (`%` names, untyped operands)",
    "short": "the short print style (no `%` names)",
    "none": "no HLO instruction lines (xDSL IR or MLIR)",
}

EMITS = {"xdsl": "xDSL IR (--emit xdsl)", "stablehlo": "StableHLO MLIR (--emit stablehlo)",
         "checks": "FileCheck lines (--generate-checks)"}  # fmt: skip

# An operand written with its shape, as the long style prints it: `(f32[2]{0} %a` or `, s32[] %b`.
_TYPED_OPERAND = re.compile(r"[(,] ?(?:[a-z][a-z0-9]*\[[0-9,]*\](?:\{[^}]*\})?|\([^)]*\)) %[\w.-]+")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?(%?)[\w.-]+ = ")


def detect_style(text: str) -> str:
    """`long`, `default` or `short`: the print style of HLO text, from its instructions
    (`none` where there are none)."""
    if text.lstrip().startswith(("builtin.module", '"builtin.module"', "module", "func.func")):
        return "none"  # xDSL IR or MLIR: SSA names look like `%` names
    percent = typed = seen = 0
    for line in text.splitlines():
        m = _INSTRUCTION.match(line)
        if m is None:
            continue
        seen += 1
        percent += bool(m.group(1))
        typed += bool(_TYPED_OPERAND.search(line))
        if percent + typed > 200:  # enough lines to tell
            break
    if typed:
        return "long"
    return "default" if percent else "short" if seen else "none"


def count_module(module: Any) -> tuple[int, int]:
    """(computations, instructions) of a module (ROOTs counted, terminators not)."""
    from hlopass.dialects.hlo import ReturnOp, computations, op_list

    comps = computations(module)
    ops = sum(1 for c in comps for op in op_list(c.regions[0].block) if type(op) is not ReturnOp)
    return len(comps), ops


def _size(text: str) -> str:
    return f"{len(text.encode()):,} bytes, {text.count(chr(10)):,} lines"


@dataclass
class OptStats:
    """Collects one `hlopass-opt` run's facts; `report` writes them."""

    source: str
    text: str
    emit: str = "hlo"
    style: str = "default"
    modules: int = 0
    comps: int = 0
    instructions: int = 0
    printed: list[Any] = field(default_factory=list)
    """The modules as printed, to print them again in the input's style."""
    passes_changed: bool = False

    def read(self, module: Any) -> None:
        c, i = count_module(module)
        self.modules += 1
        self.comps += c
        self.instructions += i
        self.printed.append(module)

    def report(self, out: TextIO, output: str, dest: str, runner: Any = None) -> None:
        style = detect_style(self.text)
        self.passes_changed = runner is not None and any(c for _, c in runner.log)
        lines = [
            f"read {self.source}: {_size(self.text)}; {self.modules} module(s), "
            f"{self.comps:,} computation(s), {self.instructions:,} instruction(s); print style "
            f"{style}: {STYLES[style]}",
            *_ran(runner),
            f"wrote {dest}: {_size(output)}, "
            + (
                EMITS.get(self.emit, self.emit)
                if self.emit != "hlo"
                else f"print style {self.style}"
            ),
        ]
        lines += self._verdict(output, style)
        for line in lines:
            print(f"hlopass-opt: stats: {line}", file=out)

    def _verdict(self, output: str, style: str) -> list[str]:
        if output == self.text:
            return ["the output text equals the input text"]
        head = f"the output text differs from the input{self._changed_note()}: "
        if self.emit != "hlo":
            return [head + "it is " + EMITS.get(self.emit, self.emit)]
        if style == "none":
            return [head + f"the input has {STYLES[style]}; the output is {STYLES[self.style]}"]
        if style == self.style:
            return [head + "because " + n if k == 0 else f"  and {n}"
                    for k, n in enumerate(_why(self.text, output))]  # fmt: skip
        lines = [head + f"input is in {STYLES[style]}; output is {STYLES[self.style]} — "
                 f"use --style {style} to keep it"]  # fmt: skip
        again = self._reprinted(style)
        if again == self.text:
            lines.append(f"  with --style {style} the output text equals the input text")
        elif again is not None:
            lines += [f"  with --style {style} it still differs: {n}" if k == 0 else f"  and {n}"
                      for k, n in enumerate(_why(self.text, again))]  # fmt: skip
        return lines

    def _changed_note(self) -> str:
        return " (the passes changed the module)" if self.passes_changed else ""

    def _reprinted(self, style: str) -> str | None:
        """The output again in the input's style (None for split input, whose chunks and
        separators are not one print)."""
        if len(self.printed) != 1:
            return None
        from hlopass.text.exporter import print_hlo

        return print_hlo(self.printed[0], style)


def _ran(runner: Any) -> list[str]:
    if runner is None or not runner.log:
        return ["ran no passes"]
    per: dict[str, list[float]] = {}
    changed: Counter[str] = Counter()
    for (name, did), secs in zip(runner.log, runner.seconds, strict=True):
        per.setdefault(name, []).append(secs)
        changed[name] += did
    total = sum(runner.seconds)
    parts = []
    for name, times in per.items():
        runs = f"{len(times)} runs, " if len(times) > 1 else ""
        what = f"changed {changed[name]}x" if len(times) > 1 else "changed"
        parts.append(f"{name} ({runs}{what if changed[name] else 'no change'}, {sum(times):.3f} s)")
    return [f"ran {len(runner.log)} pass run(s) in {total:.3f} s: " + ", ".join(parts)]


def _clip(s: str, n: int = 70) -> str:
    s = s.strip()
    return s if len(s) <= n else s[: n - 3] + "..."


def _unquote_json(m: re.Match[str]) -> str:
    return "backend_config=" + m.group(1).replace('\\"', '"')


# Spellings older XLA prints and today's does not: (what today's print does, the rewrite of
# a line of either text into one spelling).
_NEWER_SPELLINGS = (
    ("marks every fifth element of long lists with /*index=N*/",
     lambda ln: re.sub(r"/\*index=\d+\*/", "", ln)),
    ("writes a JSON backend_config unquoted",
     lambda ln: re.sub(r'backend_config="(\{(?:[^"\\]|\\.)*\})"', _unquote_json, ln)),
)  # fmt: skip


def _key(line: str) -> str:
    """What names a line: `%x.1 = ` of an instruction, `%comp (` of a computation."""
    m = re.match(r"\s*(?:ROOT |ENTRY )?%?[\w.-]+(?: = | \()", line)
    return m.group(0).replace("ROOT ", "") if m else line


def _where_differs(a: str, b: str) -> str:
    """`...before` printed `...after`, from the first character where `a` and `b` differ."""
    i = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    start = a.rfind(" ", 0, i - 20) + 1 if i > 30 else 0  # from a word's start
    dots = "..." if start else ""
    return f"`{dots}{_clip(a[start:], 60)}` printed `{dots}{_clip(b[start:], 60)}`"


def _why(before: str, after: str) -> list[str]:
    """The main differences between two HLO texts, in words, largest causes first."""
    a, b = before.splitlines(), after.splitlines()
    notes = []
    if a and b and a[0] != b[0] and a[0].split(",")[0] == b[0].split(",")[0]:
        notes.append("XLA's HloModule line lists more of the module's attributes "
                     "(entry_computation_layout...)")  # fmt: skip
        a, b = a[1:], b[1:]
    for what, rewrite in _NEWER_SPELLINGS:
        missing = sum((Counter(a) - Counter(b)).values())
        a2, b2 = [rewrite(ln) for ln in a], [rewrite(ln) for ln in b]
        explained = missing - sum((Counter(a2) - Counter(b2)).values())
        if explained > 0:
            notes.append(f"XLA's print {what} ({explained:,} lines)")
            a, b = a2, b2
    missing, added = Counter(a) - Counter(b), Counter(b) - Counter(a)
    if not missing and not added and a != b:
        notes.append("computations in another order (XLA prints callees first)")
    if not missing and added:
        example = next(ln for ln in b if added.get(ln))
        notes.append(f"the output has {sum(added.values()):,} more line(s), e.g. "
                     f"`{_clip(example)}`" if example.strip() else "blank lines differ")  # fmt: skip
    if missing:
        first = next(i for i, ln in enumerate(a) if missing.get(ln))
        extra = {_key(ln): ln for ln in (Counter(b) - Counter(a))}
        other = extra.get(_key(a[first]))
        example = (_where_differs(a[first], other) if other
                   else f"`{_clip(a[first])}` is not in the output")  # fmt: skip
        more = " more" if notes else ""
        notes.append(f"{sum(missing.values()):,}{more} input line(s) differ, e.g. {example}")
    return notes or ["whitespace or line breaks differ"]
