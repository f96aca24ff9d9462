"""`hlopass sweep`: one pipeline over every HLO module of a folder or glob, in parallel.

    >>> from hlopass.sweep.driver import sweep
    >>> rows = sweep(["../shared/corpus"], pipeline="dce,cse", jobs=4, results="r.jsonl")
    >>> [r["module"] for r in rows if not r["ok"]]

Each module becomes a `ModuleTask` (its text travels with it), run by a job
(`sweep_jobs.run_pipeline_job` unless another is given) on an engine: a local process pool
or a Ray cluster (`sweep_engines`). Every finished module is one JSON line appended to the
results file and flushed at once, so a sweep that is stopped (or loses a worker) keeps all
it finished, and a second run with the same file skips what is recorded there.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

from hlopass.errors import HloError
from hlopass.sweep.jobs import Job, ModuleTask, SweepConfig, run_pipeline_job
from hlopass.sweep.table import summary_table

__all__ = ["ModuleTask", "SweepConfig", "SweepError", "find_modules", "run_pipeline_job",
           "search_job", "summary_table", "sweep"]  # fmt: skip

SPLIT_MARKER = "// -----"


class SweepError(HloError):
    """Bad sweep input (no modules found, an unreadable results file), as one line."""


def search_job(spec: str, budget: int = 100) -> Job | None:
    """The job for `--search SPEC` (`hlopass.search.sweep_job.parse_spec`: `[SPACE][:PIPELINE]`);
    a bad SPEC is a one-line error. Its `label` names the search in the results."""
    from hlopass.search.sweep_job import parse_spec

    return parse_spec(spec, budget)


def _looks_like_hlo(path: str) -> bool:
    """A file named outside a folder's `*.hlo` files: HLO when its start says so."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.read(65536)
    except OSError:
        return False
    return "HloModule" in head or "ENTRY" in head


def _files(pattern: str) -> list[str]:
    """The HLO files of one argument: a folder (its `*.hlo`, recursively), a file, a glob."""
    if os.path.isdir(pattern):
        found = glob.glob(os.path.join(glob.escape(pattern), "**", "*.hlo"), recursive=True)
        return sorted(os.path.normpath(f) for f in found if os.path.isfile(f))
    if os.path.isfile(pattern):
        return [os.path.normpath(pattern)]
    out: list[str] = []
    for match in sorted(glob.glob(pattern, recursive=True)):
        if os.path.isdir(match):
            out += _files(match)
        elif match.endswith(".hlo") or _looks_like_hlo(match):
            out.append(os.path.normpath(match))
    return out


def _chunks(text: str) -> list[tuple[int, str]]:
    """(line offset, text) of each module of a file split by `// -----` lines; chunks that
    hold no HLO module (comments, a proto's text) are left out, as the corpus tests do."""
    from hlopass.checking.corpus import split_chunks

    return split_chunks(text)


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        return f.read()


def find_modules(paths: Sequence[str]) -> list[ModuleTask]:
    """Every module under `paths` (folders, files, globs), in a stable order."""
    files: list[str] = []
    for p in paths:
        found = _files(p)
        if not found:
            raise SweepError(f"{p}: error: no HLO files found")
        files += [f for f in found if f not in files]
    tasks: list[ModuleTask] = []
    for f in files:
        try:
            text = _read_text(f)
        except OSError:  # unreadable now: recorded as a module whose parse fails
            tasks.append(ModuleTask(f, f, 0, "", 0))
            continue
        chunks = _chunks(text)  # none: not an HLO file (a README named *.hlo)
        for i, (offset, chunk) in enumerate(chunks):
            key = f if len(chunks) == 1 else f"{f}#{i}"  # numbered from 0, as corpus ids
            tasks.append(ModuleTask(key, f, i, chunk, offset))
    if not tasks:
        raise SweepError(f"{', '.join(paths)}: error: no HLO modules found")
    return tasks


def _record_key(record: dict[str, Any]) -> tuple[str, str, str]:
    return (record.get("module", ""), record.get("pipeline", ""), record.get("device", ""))


def read_results(path: str) -> list[dict[str, Any]]:
    """The records of a results file; a last line cut short by a kill is ignored."""
    if not os.path.exists(path):
        return []
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(rec, dict) and "module" in rec:
                    out.append(rec)
    except OSError as e:
        raise SweepError(f"{path}: error: cannot read results: {e.strerror}") from None
    return out


class ResultsFile:
    """Appends one JSON line per finished module and flushes it to the OS at once."""

    def __init__(self, path: str | None):
        self.path = path
        self._f = None
        if path is not None:
            try:
                self._f = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())
                self._end_torn_line()
            except OSError as e:
                raise SweepError(f"{path}: error: cannot write results: {e.strerror}") from None

    def _end_torn_line(self) -> None:
        """A line cut short by a kill gets its newline, so the next record starts a line."""
        assert self._f is not None and self.path is not None
        with open(self.path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() == 0:
                return
            f.seek(-1, os.SEEK_END)
            torn = f.read(1) != b"\n"
        if torn:
            self._f.write("\n")
            self._f.flush()

    def add(self, record: dict[str, Any]) -> None:
        if self._f is not None:
            self._f.write(json.dumps(record, sort_keys=True) + "\n")
            self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()


def _progress(total: int, show: bool | None) -> Any:
    """A tqdm bar on stderr, shown only on a terminal (or when `show` says so)."""
    import sys

    try:
        from tqdm import tqdm
    except ImportError:  # tqdm is optional: no bar
        return None
    disable = not sys.stderr.isatty() if show is None else not show
    return tqdm(total=total, file=sys.stderr, unit="module", disable=disable, smoothing=0.1)


def sweep(
    paths: str | Sequence[str],
    pipeline: str = "",
    jobs: int | None = None,
    engine: str = "local",
    results: str | None = None,
    timeout: float = 300.0,
    device: str = "h100_sxm",
    address: str | None = None,
    plugins: Sequence[str] = (),
    job: Job = run_pipeline_job,
    progress: bool | None = None,
    verify: bool = True,
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run `pipeline` over every module under `paths`; one record per module, in module
    order (those recorded in `results` before included, not run again)."""
    from hlopass.sweep.engines import make_engine

    tasks = find_modules([paths] if isinstance(paths, str) else paths)
    config = SweepConfig(pipeline, device, float(timeout),
                         tuple(os.path.abspath(p) if os.path.isfile(p) else p for p in plugins),
                         verify)  # fmt: skip
    wanted = {_record_key({"module": t.key, "pipeline": pipeline, "device": device}) for t in tasks}
    done = (
        {_record_key(r): r for r in read_results(results) if _record_key(r) in wanted}
        if results
        else {}
    )
    todo = [t for t in tasks if (t.key, pipeline, device) not in done]
    store = ResultsFile(results)
    bar = _progress(len(todo), progress)
    fresh: dict[str, dict[str, Any]] = {}

    def finished(record: dict[str, Any]) -> None:
        store.add(record)
        fresh[record["module"]] = record
        if bar is not None:
            bar.update(1)
        if on_record is not None:
            on_record(record)

    try:
        if todo:
            make_engine(engine, jobs, address).run(todo, job, config, finished)
    finally:
        store.close()
        if bar is not None:
            bar.close()
    return [fresh.get(t.key) or done[(t.key, pipeline, device)] for t in tasks
            if t.key in fresh or (t.key, pipeline, device) in done]  # fmt: skip
