"""What one worker does with one module of a sweep: parse it, price it, run the pipeline,
price it again, and say what happened as one JSON-ready dict (never an exception).

A job is any picklable callable `job(task, config) -> dict`; `run_pipeline_job` is the one
`hlopass sweep -p` uses, and a search can bring its own (`sweep(..., job=...)`). The
per-module time limit is enforced here, in the worker, with an interval timer; the engines
add a hard limit from outside for code the timer cannot interrupt.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ModuleTask:
    """One module to sweep: `key` names it in the results (the file, `#N` for the N-th
    module of a file split by `// -----` lines); `text` is its HLO, so a worker on another
    machine needs no access to the file."""

    key: str
    file: str
    index: int
    text: str
    line_offset: int = 0
    """Lines before the module in its file: error lines point into the file."""


@dataclass(frozen=True)
class SweepConfig:
    """What every job of one sweep shares."""

    pipeline: str = ""
    device: str = "h100_sxm"
    timeout: float = 300.0
    """Seconds one module may take in its worker (0: no limit)."""
    plugins: tuple[str, ...] = field(default_factory=tuple)
    """Pass plug-ins each worker loads before its first module."""
    verify: bool = True
    """Verify shapes while parsing (False: read what XLA's parser reads, as --no-verify)."""


Job = Callable[[ModuleTask, SweepConfig], dict[str, Any]]


class ModuleTimeout(BaseException):
    """Raised in the worker when its module runs past the limit; a BaseException so that a
    pass's own `except Exception` does not swallow it."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise ModuleTimeout


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise `ModuleTimeout` in this thread after `seconds` (no limit when 0, or when this
    is not the main thread, where signals cannot be delivered: the engine's hard limit
    then stands alone)."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


_LOADED: set[str] = set()


def load_plugins(plugins: tuple[str, ...]) -> None:
    """Load each plug-in once per worker process."""
    from hlopass.plugins import load_pass_plugin

    for spec in plugins:
        if spec not in _LOADED:
            load_pass_plugin(spec)
            _LOADED.add(spec)


def module_stats(module: Any, device: str) -> dict[str, Any]:
    """Instructions (all computations), kernels and estimated time of a module; a cost
    model failure leaves the counts it could make and says why in `cost_error`."""
    import hlopass.cost
    from hlopass.commands.opt_stats import count_module

    stats: dict[str, Any] = {"instructions": count_module(module)[1], "kernels": None,
                             "time_us": None}  # fmt: skip
    try:
        est = hlopass.cost.estimate(module, device)
    except Exception as e:
        stats["cost_error"] = one_line(e, "cost model")
        return stats
    stats["kernels"] = len(est.kernels)
    stats["time_us"] = est.time_us
    return stats


def one_line(e: BaseException, where: str) -> str:
    from hlopass.commands.clirun import error_line
    from hlopass.driver.crash import describe

    if isinstance(e, ModuleTimeout):
        return f"{where}: error: timed out"
    from hlopass.errors import HloError

    if isinstance(e, HloError):
        return error_line(e, where)
    return f"{where}: error: crashed: {describe(e)}"


def parse_task(task: ModuleTask, verify: bool = True) -> Any:
    from hlopass.commands.cli import parse_input

    return parse_input("\n" * task.line_offset + task.text, task.file, verify=verify)


def base_record(task: ModuleTask, config: SweepConfig) -> dict[str, Any]:
    return {"module": task.key, "file": task.file, "index": task.index,
            "pipeline": config.pipeline, "device": config.device, "ok": False,
            "error": None, "before": None, "after": None, "seconds": 0.0}  # fmt: skip


def prepare(config: SweepConfig) -> None:
    """What a worker does once, outside any module's time limit: import the pipeline and
    the cost model, load the plug-ins."""
    import hlopass.commands.opt_stats  # noqa: F401
    import hlopass.cost  # noqa: F401

    load_plugins(config.plugins)
    _warm(config.pipeline, config.device)


_TINY = (
    "HloModule warm\n\nENTRY e {\n  p = f32[8]{0} parameter(0)\n  ROOT n = f32[8]{0} negate(p)\n}\n"
)


@functools.cache
def _warm(pipeline: str, device: str) -> None:
    """Once per worker: parse the pipeline (its passes' modules are imported then) and price
    a tiny module (the cost model loads its device tables), so that what is paid once is
    not charged to the first module's time limit."""
    from hlopass.commands.cli import parse_input
    from hlopass.pipeline import parse_pass_pipeline

    parse_pass_pipeline(pipeline)
    module_stats(parse_input(_TINY, "<warm-up>"), device)


def run_pipeline_job(task: ModuleTask, config: SweepConfig) -> dict[str, Any]:
    """Parse, price, run `config.pipeline`, price again: the sweep's default job."""
    record = base_record(task, config)
    stage = "parse"
    t0 = time.perf_counter()
    try:
        prepare(config)
        t0 = time.perf_counter()
        with time_limit(config.timeout):
            module = parse_task(task, config.verify)
            stage = "cost"
            record["before"] = module_stats(module, config.device)
            stage = "pipeline"
            from hlopass.pipeline import Runner, parse_pass_pipeline

            Runner().run(parse_pass_pipeline(config.pipeline), module)
            stage = "cost"
            record["after"] = module_stats(module, config.device)
        record["ok"] = True
    except ModuleTimeout:
        record["error"] = f"{task.key}: error: timed out after {config.timeout:g} s ({stage})"
    except BaseException as e:  # recorded, whatever it is: one module never stops a sweep
        if isinstance(e, KeyboardInterrupt):
            raise
        record["error"] = one_line(e, task.key)
    record["seconds"] = round(time.perf_counter() - t0, 3)
    return record
