"""What every command does with failure: one line on stderr, never a traceback.

`guard(body, where)` runs a command's body and turns each way it can end badly into one
line `where: error: message` (or the error's own `file:line:col: error: message`) and an
exit status: 1 for bad input, 2 for usage (argparse, via `OneLineArgumentParser`), 130 for
Ctrl-C, 141 (as if killed by SIGPIPE) when the reader of stdout went away (`... | head -1`).
An exception that is not an `HloError` is a bug of hlopass: it is still reported in one
line, marked "internal error"; `HLOPASS_TRACEBACK=1` re-raises it for debugging.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from collections.abc import Callable
from typing import NoReturn

from hlopass.errors import HloError

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what `yes | head -1` reports for `yes`

_LOCATED = re.compile(r"\S[^\n]*?: error: ")


def whole_number(expected: str) -> Callable[[str], int]:
    """An argparse `type`: a whole number >= 0, else a usage error `expected <expected>,
    got '<text>'` (a negative count is a mistake, not "none")."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            n = -1
        if n < 0:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return n

    return parse


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse with its usage errors on one line (`prog: error: ... (see prog --help)`)
    instead of the usage block followed by the error."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}{self._hint(message)} "
                  f"(see {self.prog} --help)\n")  # fmt: skip

    def _hint(self, message: str) -> str:
        """` (did you mean '--x'?)` for a misspelt flag or choice."""
        import difflib

        if message.startswith("unrecognized arguments: "):
            words = [w.split("=")[0] for w in message.split(": ", 1)[1].split()]
            flags = [f for a in self._actions for f in a.option_strings if f.startswith("--")]
            pool, word = flags, next((w for w in words if w.startswith("-")), "")
        else:
            m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
            if m is None:
                return ""
            pool, word = re.findall(r"'([^']*)'", m.group(2)), m.group(1)
        close = difflib.get_close_matches(word, pool, n=1, cutoff=0.6) if word else []
        return f" (did you mean '{close[0]}'?)" if close else ""


def error_line(e: BaseException, where: str) -> str:
    """The one line reporting `e`: its own when it names a place, else `where: error: ...`."""
    text = str(e).strip()
    first = text.splitlines()[0] if text else type(e).__name__
    if _LOCATED.match(first):
        return first
    if first.startswith("error: "):
        first = first[len("error: ") :]
    return f"{where}: error: {first}"


def say(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # stderr closed too: nothing to tell
        print(line, file=sys.stderr)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so Python's flush at exit does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def guard(body: Callable[[], int], where: str) -> int:
    """Run a command body; return its exit status, reporting any failure in one line."""
    try:
        status = body()
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return status
    except HloError as e:
        say(error_line(e, where))
        return EXIT_ERROR
    except KeyboardInterrupt:
        say(f"{where}: error: interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except MemoryError:
        say(f"{where}: error: out of memory")
        return EXIT_ERROR
    except RecursionError:
        say(f"{where}: error: input nests too deeply")
        return EXIT_ERROR
    except Exception as e:
        if os.environ.get("HLOPASS_TRACEBACK"):
            raise
        lines = str(e).strip().splitlines()
        what = f"{type(e).__name__}: {lines[0]}" if lines else type(e).__name__
        say(f"{where}: error: internal error: {what} (HLOPASS_TRACEBACK=1 shows where)")
        return EXIT_ERROR
