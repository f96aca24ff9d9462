"""A mutation fuzzer over HLO modules: what hlopass must survive on any input.

`mutants(seeds, rng)` yields mutated module texts (token deletion, duplication and swap,
changed numbers, opcodes, element types and layouts, truncation, unbalanced brackets,
random unicode). `check(text)` runs one through everything a user can do with it and
returns what went wrong:

- parsing may only raise `HloParseError` (a rejected mutant);
- an accepted mutant must survive `fixpoint{passes=algsimp,constant-folding,dce,cse}` with
  verification after each pass, `hlopass cost` (an `HloError` is allowed there, nothing
  else), and printing, and its print must read back;
- nothing may take longer than the per-case time limit.

`xla_accepts_many(texts)` asks XLA's parser about many texts in a child process (XLA may
abort on some input; the child is restarted after a crash). tests/test_fuzz.py runs a
fixed-seed budget in CI; benchmarks/fuzz.py runs long campaigns.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from hlopass.dialects.opcodes import OPCODES
from hlopass.errors import HloError, HloParseError
from hlopass.ir.shape import ELEMENT_BITS

PIPELINE = "fixpoint{passes=algsimp,constant-folding,dce,cse}"

_TOKEN = re.compile(r"[A-Za-z_%][\w.\-]*|-?\d+(?:\.\d+)?(?:e[+-]?\d+)?|\s+|.", re.S)
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?![\w.])")
_OPCODE = re.compile(
    r"(?<=\s)("
    + "|".join(re.escape(o) for o in sorted(OPCODES, key=len, reverse=True))
    + r")(?=\()"
)
_ETYPE = re.compile(r"\b(" + "|".join(sorted(ELEMENT_BITS, key=len, reverse=True)) + r")(?=\[)")
_LAYOUT = re.compile(r"(?<=\])\{[\d,]*(?::[^}]*)?\}")
_INTERESTING_NUMBERS = (
    "0", "1", "-1", "2", "3", "7", "8", "64", "255", "256", "-128", "65535", "2147483647",
    "-2147483648", "9223372036854775807", "9223372036854775808", "-9223372036854775809",
    "18446744073709551616", "99999999999999999999",
)  # fmt: skip
_UNICODE = (
    "\x00", "\t", "\r", "\x7f", "\u00e9", "\u00a0", "\u200b", "\u2028", "\u202e", "\ufeff",
    "\u0301", "\U0001f600", "\uffff", "\u4e2d", "\\", '"', "'", "`",
)  # fmt: skip
_BRACKETS = "(){}[]<>"


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _replace_match(
    text: str,
    pattern: re.Pattern[str],
    rng: random.Random,
    choices: Callable[[str], str] | Sequence[str],
) -> str | None:
    found = list(pattern.finditer(text))
    if not found:
        return None
    m = rng.choice(found)
    new = choices(m.group(0)) if callable(choices) else rng.choice(choices)
    return text[: m.start()] + new + text[m.end() :]


def _mutate_once(text: str, rng: random.Random) -> tuple[str, str]:
    """One mutation: (its kind, the new text, never the same as `text`)."""
    kind = rng.choice(_KINDS)
    for _ in range(10):  # a few tries: a kind can find nothing to change, or change nothing
        new = _apply(kind, text, rng)
        if new is not None and new != text:
            return kind, new
    i = rng.randrange(len(text) + 1)
    return "unicode", text[:i] + "".join(
        rng.choice(_UNICODE) for _ in range(rng.randint(1, 3))
    ) + text[i:]


def _apply(kind: str, text: str, rng: random.Random) -> str | None:
    """`text` with one mutation of `kind`, or None when it finds nothing to change."""
    toks = _tokens(text)
    solid = [i for i, t in enumerate(toks) if not t.isspace()]
    if kind == "delete_token" and solid:
        del toks[rng.choice(solid)]
        return "".join(toks)
    if kind == "duplicate_token" and solid:
        i = rng.choice(solid)
        toks.insert(i, toks[i])
        return "".join(toks)
    if kind == "swap_tokens" and len(solid) > 1:
        i, j = rng.sample(solid, 2)
        toks[i], toks[j] = toks[j], toks[i]
        return "".join(toks)
    if kind == "number":
        return _replace_match(
            text, _NUMBER, rng,
            lambda s: rng.choice((*_INTERESTING_NUMBERS, str(int(s) + 1), str(int(s) - 1), str(int(s) * 2))),
        )  # fmt: skip
    if kind == "opcode":
        return _replace_match(text, _OPCODE, rng, sorted(OPCODES))
    if kind == "element_type":
        return _replace_match(text, _ETYPE, rng, sorted(ELEMENT_BITS))
    if kind == "layout":
        return _replace_match(text, _LAYOUT, rng, _layout_variant(rng))
    if kind == "truncate" and text:
        return text[: rng.randrange(len(text))]
    if kind == "bracket":
        i = rng.randrange(len(text) + 1)
        if rng.random() < 0.5:
            return text[:i] + rng.choice(_BRACKETS) + text[i:]
        spots = [j for j, c in enumerate(text) if c in _BRACKETS]
        if spots:
            j = rng.choice(spots)
            return text[:j] + text[j + 1 :]
    if kind == "unicode":
        i = rng.randrange(len(text) + 1)
        return text[:i] + "".join(rng.choice(_UNICODE) for _ in range(rng.randint(1, 3))) + text[i:]
    return None


def _layout_variant(rng: random.Random) -> Callable[[str], str]:
    def variant(layout: str) -> str:
        body = layout[1:-1]
        dims = [d for d in body.split(":")[0].split(",") if d]
        choice = rng.randrange(5)
        if choice == 0 and dims:
            rng.shuffle(dims)
            return "{" + ",".join(dims) + "}"
        if choice == 1:
            return "{" + ",".join(dims[:-1]) + "}"
        if choice == 2:
            return "{" + ",".join([*dims, str(len(dims))]) + "}"
        if choice == 3:
            return (
                "{"
                + ",".join(dims)
                + rng.choice((":T(8,128)", ":T(2)(4)", ":E(4)", ":S(1)", ":T(0)"))
                + "}"
            )
        return "{}"

    return variant


_KINDS = (
    "delete_token", "duplicate_token", "swap_tokens", "number", "opcode", "element_type",
    "layout", "truncate", "bracket", "unicode",
)  # fmt: skip


def mutants(seeds: list[str], rng: random.Random) -> Iterator[tuple[str, str]]:
    """Endless (kinds, mutated text): a seed with one to three mutations."""
    while True:
        text = rng.choice(seeds)
        kinds = []
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            kind, text = _mutate_once(text, rng)
            kinds.append(kind)
        yield "+".join(kinds), text


# --- running one case -------------------------------------------------------------------


class CaseTimeout(Exception):
    """A case ran past its time limit (raised by the alarm)."""


@dataclass
class Outcome:
    """What one mutant did. `problem` is None when it behaved."""

    accepted: bool = False
    problem: str | None = None  # "crash in <stage>: <type>: <message> @ file:line" or "slow"
    stage: str = ""
    printed: str | None = None  # the print of the accepted mutant (for XLA's parser)
    seconds: float = 0.0
    cost_refused: str | None = None  # an HloError from the cost model (allowed)


def _where(e: BaseException) -> str:
    frames = traceback.extract_tb(e.__traceback__)
    mine = [
        f
        for f in frames
        if "hlopass" in f.filename or "/passes/" in f.filename or "/dialects/" in f.filename
    ]
    f = (mine or frames or [None])[-1]
    return f"{os.path.basename(f.filename)}:{f.lineno}" if f is not None else "?"


def check(text: str, time_limit: float = 10.0) -> Outcome:
    """Run `text` through parse, passes (verified after each), cost and print."""
    from hlopass.pipeline import run_pipeline
    from hlopass.text.exporter import print_hlo
    from hlopass.text.importer import parse_hlo

    out = Outcome()
    start = time.perf_counter()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, time_limit)
    try:
        out.stage = "parse"
        try:
            module = parse_hlo(text, "mutant.hlo")
        except HloParseError:
            return out
        out.accepted = True
        out.stage = "print"
        out.printed = print_hlo(module)
        out.stage = "reparse"
        parse_hlo(out.printed, "printed.hlo")
        out.stage = "cost"
        try:
            import hlopass.cost

            hlopass.cost.estimate(module)
        except HloError as e:
            out.cost_refused = str(e).splitlines()[0] if str(e) else type(e).__name__
        out.stage = "passes"
        run_pipeline(module, PIPELINE, verify_each=True)
        out.stage = "print after passes"
        after = print_hlo(module)
        out.stage = "reparse after passes"
        parse_hlo(after, "after.hlo")
        out.stage = "cost after passes"
        with contextlib.suppress(HloError):  # (refusals were counted before the passes)
            hlopass.cost.estimate(module)
    except CaseTimeout:
        out.problem = f"slow: over {time_limit:g} s in {out.stage}"
    except RecursionError as e:
        out.problem = f"crash in {out.stage}: RecursionError @ {_where(e)}"
    except Exception as e:
        lines = str(e).strip().splitlines()
        out.problem = f"crash in {out.stage}: {type(e).__name__}: {lines[0][:200] if lines else ''} @ {_where(e)}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        out.seconds = time.perf_counter() - start
    return out


def _on_alarm(signum, frame):
    raise CaseTimeout


# --- XLA's parser on many texts, in a child process --------------------------------------


def xla_accepts_many(texts: list[str], timeout: float = 600) -> list[tuple[bool | None, str]]:
    """(accepted, XLA's message) per text; (None, why) where XLA aborted on it."""
    results: list[tuple[bool | None, str] | None] = [None] * len(texts)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "texts.json")
        with open(path, "w") as f:
            json.dump(texts, f)
        start = 0
        env = dict(os.environ, JAX_PLATFORMS="cpu")
        while start < len(texts):
            proc = subprocess.run(
                [sys.executable, "-m", "hlopass.checking.fuzz", "--xla-child", path, str(start)],
                capture_output=True, text=True, timeout=timeout, env=env,
            )  # fmt: skip
            current = start
            for line in proc.stdout.splitlines():
                try:
                    msg = json.loads(line)
                except json.JSONDecodeError:
                    continue
                results[msg["i"]] = (msg["ok"], msg["why"])
                current = msg["i"] + 1
            if current >= len(texts):
                break
            if results[current] is None:
                tail = proc.stderr.strip().splitlines()[-1:] or [""]
                results[current] = (None, f"XLA aborted (rc {proc.returncode}): {tail[0][:200]}")
            start = current + 1
    return [r if r is not None else (None, "no result") for r in results]


def _xla_child(path: str, start: int) -> None:
    from hlopass.execution import oracle

    with open(path) as f:
        texts = json.load(f)
    for i in range(start, len(texts)):
        try:
            oracle.parse(texts[i])
            ok, why = True, ""
        except Exception as e:  # XLA's message: a generic first line, the detail after it
            lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
            ok, why = False, " | ".join(lines[1:3] or lines[:1])[:300]
        print(json.dumps({"i": i, "ok": ok, "why": why}), flush=True)


# --- a campaign ---------------------------------------------------------------------------


@dataclass
class Report:
    cases: int = 0
    accepted: int = 0
    problems: list[tuple[str, str, str]] = field(default_factory=list)  # (kinds, problem, text)
    slow: list[tuple[float, str, str]] = field(default_factory=list)  # (seconds, kinds, text)
    cost_refused: dict[str, int] = field(default_factory=dict)
    printed: list[tuple[str, str]] = field(default_factory=list)  # (mutant, its print)


def campaign(
    seeds: list[str],
    seed: int,
    count: int,
    time_limit: float = 10.0,
    deadline: float | None = None,
    slow_after: float = 2.0,
) -> Report:
    """Run `count` mutants (or until `deadline`, a `time.monotonic()` value)."""
    rng = random.Random(seed)
    report = Report()
    for kinds, text in mutants(seeds, rng):
        if report.cases >= count or (deadline is not None and time.monotonic() > deadline):
            break
        report.cases += 1
        out = check(text, time_limit)
        if out.seconds > slow_after:
            report.slow.append((out.seconds, kinds, text))
        if out.accepted:
            report.accepted += 1
            if out.printed is not None and out.problem is None:
                report.printed.append((text, out.printed))
        if out.cost_refused:
            key = re.sub(r"\d+", "N", out.cost_refused.split("error: ")[-1])[:80]
            report.cost_refused[key] = report.cost_refused.get(key, 0) + 1
        if out.problem is not None:
            report.problems.append((kinds, out.problem, text))
    return report


def seed_texts(root, max_chars: int = 6000, limit: int | None = None) -> list[str]:
    """Small corpus modules that hlopass accepts: the fuzzer's seeds (at most `limit`,
    spread evenly over the corpus)."""
    from hlopass.checking.corpus import modules
    from hlopass.text.importer import parse_hlo

    small = [m for m in modules(root) if len(m.text) <= max_chars]
    if limit is not None and len(small) > limit:
        small = small[:: -(-len(small) // limit)]
    out = []
    for m in small:
        try:
            parse_hlo(m.text)
        except HloError:
            continue
        out.append(m.text)
    return out


def xla_differences(printed: Iterable[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """Accepted mutants whose print XLA's parser rejects: (mutant, print, reason). Where XLA
    also rejects the mutant itself the difference is ours to accept more, and listed with
    XLA's message as the reason."""
    pairs = list(printed)
    verdicts = xla_accepts_many([p for _, p in pairs] + [m for m, _ in pairs])
    n = len(pairs)
    out = []
    for i, (mutant, text) in enumerate(pairs):
        ok, why = verdicts[i]
        if ok:
            continue
        src_ok, src_why = verdicts[n + i]
        reason = f"XLA rejects our print: {why}"
        if not src_ok:
            reason += f" (and the mutant itself: {src_why})"
        out.append((mutant, text, reason))
    return out


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "--xla-child":
    _xla_child(sys.argv[2], int(sys.argv[3]))
