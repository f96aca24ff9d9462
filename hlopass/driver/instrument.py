"""What a pipeline run shows its user: pass timings, IR diffs, rewrite counts, progress.

`Runner` (hlopass.pipeline) calls these around each pass; they print to a stream (stderr
by default) and never change the module.
"""

from __future__ import annotations

import difflib
import re
import sys
import threading
import time
from collections import Counter
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp


class PassTimer:
    """Wall time per pass name (accumulated over fixpoint rounds), printed as xdsl-opt and
    MLIR print `--time-passes` (name, seconds, share of the total)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.runs: Counter[str] = Counter()

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds
        self.runs[name] += 1

    def report(self) -> str:
        total = sum(self.seconds.values())
        rule = "===" + "-" * 73 + "==="
        lines = [
            rule,
            "... Pass execution timing report ...".center(79).rstrip(),
            rule,
            f"  Total Execution Time: {total:.4f} seconds",
            "",
            "  ----Wall Time----  ----Runs----  ----Name----",
        ]
        for name, s in self.seconds.items():
            share = 100.0 * s / total if total else 0.0
            lines.append(f"  {s:9.4f} ({share:5.1f}%)  {self.runs[name]:12d}  {name}")
        lines.append(f"  {total:9.4f} (100.0%)  {sum(self.runs.values()):12d}  Total")
        return "\n".join(lines) + "\n"


class RewriteCounter:
    """Counts rewrites per pattern and prints each with its rewrite (its docstring's line)."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.counts: Counter[str] = Counter()

    def __call__(self, pattern: str, what: str) -> None:
        from hlopass.rewriting import rewrite_text

        self.counts[pattern] += 1
        rule = rewrite_text(pattern)
        print(f"// rewrite {pattern}{f' [{rule}]' if rule else ''}: {what}", file=self.out)

    def report(self) -> str:
        from hlopass.rewriting import rewrite_text

        if not self.counts:
            return "// rewrites: none\n"
        lines = [f"// rewrites: {sum(self.counts.values())} by {len(self.counts)} patterns"]
        for name, n in self.counts.most_common():
            rule = rewrite_text(name)
            lines.append(f"//   {n:6d}  {name}{f'  {rule}' if rule else ''}")
        return "\n".join(lines) + "\n"


_COMP_HEAD = re.compile(r"^(?:ENTRY )?%?([^\s(]+) ", re.M)


def split_computations(text: str) -> dict[str, str]:
    """A printed module's computations by name (the header line block comes first as '')."""
    blocks: dict[str, str] = {}
    for block in text.split("\n\n"):
        m = _COMP_HEAD.match(block)
        key = "" if block.startswith("HloModule") or m is None else m.group(1)
        blocks[key] = blocks.get(key, "") + block + "\n"
    return blocks


def computation_diff(before: str, after: str, label: str) -> str:
    """Unified diff of the computations that differ between two prints of a module."""
    old, new = split_computations(before), split_computations(after)
    out: list[str] = []
    for name in list(old) + [n for n in new if n not in old]:
        a, b = old.get(name, ""), new.get(name, "")
        if a == b:
            continue
        what = name or "module header"
        out.extend(
            difflib.unified_diff(
                a.splitlines(keepends=True),
                b.splitlines(keepends=True),
                fromfile=f"{what} (before {label})",
                tofile=f"{what} (after {label})",
            )
        )
    return "".join(line if line.endswith("\n") else line + "\n" for line in out)


class Progress:
    """One self-rewriting line on a terminal's stderr while a long pipeline runs.

    Silent unless the stream is a terminal, and only after `delay` seconds, so short runs,
    pipes and CI logs never see it."""

    def __init__(self, out: IO[str] | None = None, delay: float = 2.0, every: float = 0.5):
        self.out = out if out is not None else sys.stderr
        self.enabled = bool(getattr(self.out, "isatty", lambda: False)())
        self.delay, self.every = delay, every
        self.current = ""
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._shown = False
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Progress:
        if self.enabled:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._shown:
            self.out.write("\r\x1b[K")
            self.out.flush()

    def _loop(self) -> None:
        if self._stop.wait(self.delay):
            return
        while not self._stop.is_set():
            elapsed = time.monotonic() - self.started
            self.out.write(f"\r\x1b[K[hlopass] {elapsed:5.1f}s  {self.current}")
            self.out.flush()
            self._shown = True
            self._stop.wait(self.every)


def print_module(module: ModuleOp) -> str:
    from hlopass.text.exporter import print_hlo

    return print_hlo(module)
