"""The parser takes time linear in its input, for every token class and attribute value.

Each case builds a module around a run of N characters of one kind (blanks, comments,
strings, numbers, names, shapes, layouts, attribute values, literals...), most of them
followed by a character the parser does not expect there. A regular expression that
backtracks over the run (nested quantifiers: `(?:\\s+|...)*` once took 38 s on 26 blanks)
or a scan that restarts at every token shows up as a growing cost per character.

Counting, not timing against a threshold: each case is parsed at N and at 8N characters in
the same process and the ratio of the two costs must stay under 16 (linear: about 8,
quadratic: 64, exponential: never ends). The cost of each size is the minimum of five
runs, the two sizes interleaved, so that load from elsewhere must slow every large run to
fail a linear case (measured back to back, it once did: 17x on a busy 2-core machine).
A SIGALRM guard turns a runaway match (the regex engine checks signals) into a failure
instead of a hung suite.
"""

from __future__ import annotations

import contextlib
import signal
import time
import tracemalloc
from collections.abc import Callable

import pytest

from hlopass import parse_hlo

N = 10_000
GROWTH = 8
MAX_RATIO = 16
REPS = 5  # timings of each size, interleaved
GUARD_S = 30  # a case that takes this long is not linear (8N takes well under a second)

HEAD = "HloModule m\n\nENTRY main {\n  p = f32[4] parameter(0)\n"


def _body(line: str) -> str:
    return HEAD + line + "\n  ROOT r = f32[4] negate(p)\n}\n"


def _attr(value: str, head: str = "negate(p)") -> str:
    """`value` as an attribute of an instruction (`head`) that takes it."""
    return _body(f"  x = f32[4] {head}, {value}")


def _ints(value: str) -> str:
    return _attr(value, "reverse(p)")


def _conv(value: str) -> str:
    return _attr(value, "convolution(p, p)")


def _custom(value: str) -> str:
    return _attr(value, 'custom-call(p), custom_call_target="t"')


def _collective(value: str) -> str:
    return _attr(value, "all-gather(p), dimensions={0}")


def _run(unit: str, n: int) -> str:
    return unit * max(1, n // len(unit))


# name -> builder of the module text with a run of about n characters.
CASES: dict[str, Callable[[int], str]] = {
    # trivia
    "blanks then bad char": lambda n: HEAD + " " * n + "!\n}",
    "continuation line": lambda n: HEAD + "  t = (f32[4]) tuple(f32[4] p,\n" + " " * n + "&q)\n}",
    "mixed blanks": lambda n: HEAD + _run(" \t\n\r", n) + "!\n}",
    "line comments": lambda n: HEAD + _run("// c\n", n) + "!\n}",
    "one long line comment": lambda n: HEAD + "//" + "c" * n + "\n!\n}",
    "block comments": lambda n: HEAD + _run("/* c */ ", n) + "!\n}",
    "one long block comment": lambda n: HEAD + "/*" + "c" * n + "*/ !\n}",
    "unterminated block comment": lambda n: HEAD + "/*" + _run("c *", n) + "\n}",
    "blanks between comments": lambda n: HEAD + _run("  /**/  //\n", n) + "!\n}",
    # strings
    "long string": lambda n: _attr('metadata={op_name="' + "a" * n + '"} !'),
    "escapes in a string": lambda n: _attr('metadata={op_name="' + _run('\\"', n) + '"} !'),
    "backslashes in a string": lambda n: _attr('metadata={op_name="' + _run("\\\\", n) + '"} !'),
    "unterminated string": lambda n: _attr('metadata={op_name="' + _run('a\\"', n)),
    "octal escapes": lambda n: _attr('metadata={op_name="' + _run("\\101", n) + '"} !'),
    "hex and unicode escapes": lambda n: _attr(
        'backend_config="' + _run("\\x41\\u00e9", n) + '" !'
    ),
    "bad escape at the end": lambda n: _attr('metadata={op_name="' + _run("\\101", n) + '\\q"}'),
    "many metadata fields": lambda n: _attr("metadata={" + _run("a=1  ", n) + "!}"),
    "many metadata strings": lambda n: _attr("metadata={" + _run('a="x"  ', n) + "!}"),
    "string attribute": lambda n: _attr('backend_config="' + "a" * n + '" !'),
    # numbers
    "long integer": lambda n: _ints("dimensions={" + "1" * n + "!}"),
    "long float literal": lambda n: _body("  c = f32[] constant(1." + "1" * n + "!)"),
    "long exponent": lambda n: _body("  c = f32[] constant(1e" + "1" * n + "x)"),
    "digits then a letter": lambda n: _body("  c = f32[] constant(" + "1" * n + "a)"),
    "dim list NxN": lambda n: _conv("window={size=" + _run("1x", n) + "1_}"),
    "padding list": lambda n: _conv("window={size=1 pad=" + _run("1_1x", n) + "1_1_!}"),
    "negative numbers": lambda n: _ints("dimensions={" + _run("-1,", n) + "-!}"),
    # names
    "long name": lambda n: _body("  " + "a" * n + " = f32[4] negate(p) !"),
    "long name with dots": lambda n: _body("  " + _run("a.", n) + "b = f32[4] negate(p) !"),
    "non-ASCII name": lambda n: _body("  a." + "\u00e9" * n + ".x = f32[4] negate(p)"),
    "non-ASCII name segments": lambda n: _body("  a" + _run(".\u00e9", n) + " = f32[4] negate(p)"),
    "long attribute name": lambda n: _attr("a" * n + "=1 !"),
    "long operand name": lambda n: _body("  x = f32[4] negate(" + "q" * n + "!)"),
    "many operands": lambda n: _body("  x = f32[4] add(" + _run("p, ", n) + "!)"),
    # shapes and layouts
    "long dimension list": lambda n: _body("  x = f32[" + _run("1,", n) + "1] negate(p) !"),
    "unclosed dimension list": lambda n: _body("  x = f32[" + _run("1,", n) + "negate(p)"),
    "long layout": lambda n: _body("  x = f32[4]{" + _run("0,", n) + "0} negate(p)"),
    "layout attributes": lambda n: _body("  x = f32[4]{0:" + _run("T(1)", n) + "!} negate(p)"),
    "many tuple elements": lambda n: _body("  x = (" + _run("f32[], ", n) + "!) tuple()"),
    "shape list attribute": lambda n: _custom(
        "operand_layout_constraints={" + _run("f32[], ", n) + "!}"
    ),
    "nested tuple shape": lambda n: _body(
        "  x = " + "(" * (n // 8) + "f32[]" + ")" * (n // 8) + " tuple() !"
    ),
    # attribute values
    "long int list": lambda n: _ints("dimensions={" + _run("1,", n) + "1,}"),
    "slice list": lambda n: _body("  x = f32[1] slice(p), slice={" + _run("[0:1], ", n) + "[0:}"),
    "braced backend config": lambda n: _attr("backend_config={" + "a" * n + "} !"),
    "nested braces": lambda n: _attr("backend_config={" + _run('{"a":1}', n) + "} !"),
    "unbalanced braces": lambda n: _attr("backend_config={" + _run("{a", n)),
    "frontend attributes": lambda n: _attr("frontend_attributes={" + _run('a="b",', n) + "!}"),
    "replica groups": lambda n: _collective("replica_groups={" + _run("{0,1},", n) + "!}"),
    "iota replica groups": lambda n: _collective("replica_groups=[" + _run("1,", n) + "1]<=[!"),
    "sharding": lambda n: _attr("sharding={devices=[" + _run("1,", n) + "1]0!}"),
    "dim labels": lambda n: _conv("dim_labels=" + "b" * n + "_oi->bf"),
    "array literal": lambda n: _body("  c = f32[2] constant({" + _run("1, ", n) + "!})"),
    "nested literal": lambda n: _body("  c = f32[1,1] constant(" + "{" * (n // 2) + "!)"),
    "stack frame tables": lambda n: "HloModule m\n\nFileNames\n" + _run('1 "a"\n', n) + "!\n",
    "string in a custom call": lambda n: _custom('backend_config="' + _run("\\n", n) + '" !'),
    "long opaque value": lambda n: _custom("api_version=" + "A" * n + "!"),
    "complex literal": lambda n: _body("  c = c64[2] constant({(1," + " " * n + "x), (1, 2)})"),
}


class _Runaway(BaseException):  # not swallowed by `_cost`'s `suppress(Exception)`
    pass


def _on_alarm(signum, frame):
    raise _Runaway


def _cost(text: str, reps: int = 3) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.process_time()
        # any error ends the case: which errors are right is for tests/test_bad_input.py
        with contextlib.suppress(Exception):
            parse_hlo(text, "case.hlo")
        best = min(best, time.process_time() - t0)
    return best


@pytest.mark.parametrize("case", list(CASES))
def test_parse_time_is_linear(case):
    build = CASES[case]
    small, large = build(N), build(N * GROWTH)
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(GUARD_S)
    try:
        _cost(small, 1)  # warm caches (first-use compilation of patterns, imports)
        # Interleaved, the minimum of each: a burst of load elsewhere (another process on
        # a 2-core machine once made one case 17x) has to hit every large run to count.
        t_small = t_large = float("inf")
        for _ in range(REPS):
            t_small = min(t_small, _cost(small, 1))
            t_large = min(t_large, _cost(large, 1))
    except _Runaway:
        pytest.fail(f"{case}: parsing {len(small)} characters did not end in {GUARD_S} s")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    # a floor of 1 ms for the small run: below it the ratio measures timer noise
    ratio = t_large / max(t_small, 1e-3)
    assert ratio < MAX_RATIO, (
        f"{case}: {GROWTH}x the input took {ratio:.1f}x the time "
        f"({t_small * 1e3:.1f} ms -> {t_large * 1e3:.1f} ms): not linear"
    )


# Long values whose text the parser keeps: a string token once cost ~170 bytes of
# backtracking state per character (a 20 MB op_name: 3.4 GB).
MEMORY_CASES: dict[str, Callable[[int], str]] = {
    "op_name": lambda n: _attr('metadata={op_name="' + "a" * n + '"}'),
    "op_name of escapes": lambda n: _attr('metadata={op_name="' + _run('\\"', n) + '"}'),
    "string backend config": lambda n: _custom('backend_config="' + "a" * n + '"'),
    "braced backend config": lambda n: _custom('backend_config={"k":"' + "a" * n + '"}'),
    "frontend attribute": lambda n: _attr('frontend_attributes={a="' + "b" * n + '"}'),
    "unterminated string": lambda n: _attr('metadata={op_name="' + "a" * n),
}
MAX_BYTES_PER_CHAR = 16  # copies of the value (token, unescaped text, attribute): ~2-7


@pytest.mark.parametrize("case", list(MEMORY_CASES))
def test_parse_memory_is_linear_and_small(case):
    """Peak memory the parse allocates (tracemalloc counts the regex engine's state too),
    per character of the long value."""
    n = 200_000
    text = MEMORY_CASES[case](n)
    tracemalloc.start()
    try:
        with contextlib.suppress(Exception):
            parse_hlo(text, "case.hlo")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak / n < MAX_BYTES_PER_CHAR, f"{case}: {peak / n:.0f} bytes per character"
