"""The job `hlopass sweep --search SPEC` runs on each module: a search (`SPACES`) around a
pipeline, recorded as the sweep records a pipeline (instructions, kernels and estimated time
before and after, the best plan being "after"), with the search's own numbers under
`search`. Whatever goes wrong is the record's one-line error, never an exception.

SPEC is `[SPACE][:PIPELINE]`: SPACE one of `SPACES` (default `pipeline`), PIPELINE one that
holds priority-fusion once (default `DEFAULT_PIPELINE`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from hlopass.errors import HloError

DEFAULT_PIPELINE = (
    "call-inliner,algsimp,constant-folding,dce,cse,priority-fusion,multi-output-fusion"
)
DEFAULT_SPACE = "pipeline"


class SearchSpecError(HloError):
    """A `--search` SPEC that names no search, as one line."""


@dataclass(frozen=True)
class SearchJob:
    """A picklable sweep job: `space` searched around `pipeline` with `budget` plans."""

    space: str = DEFAULT_SPACE
    pipeline: str = DEFAULT_PIPELINE
    budget: int = 100

    @property
    def label(self) -> str:
        """What the results file records as the module's pipeline (resuming keys on it)."""
        return f"search {self.space} budget={self.budget}: {self.pipeline}"

    def __call__(self, task: Any, config: Any) -> dict[str, Any]:
        from hlopass.sweep.jobs import ModuleTimeout, base_record, one_line, prepare

        record = base_record(task, config)
        stage = "parse"
        t0 = time.perf_counter()
        try:
            prepare(replace(config, pipeline=self.pipeline))  # warms this job's passes
            t0 = time.perf_counter()
            stage = "search"
            self._run(task, config, record)
            record["ok"] = True
        except ModuleTimeout:
            record["error"] = f"{task.key}: error: timed out after {config.timeout:g} s ({stage})"
        except BaseException as e:  # one module never stops a sweep
            if isinstance(e, KeyboardInterrupt):
                raise
            record["error"] = one_line(e, task.key)
        record["seconds"] = round(time.perf_counter() - t0, 3)
        return record

    def _run(self, task: Any, config: Any, record: dict[str, Any]) -> None:
        from hlopass.search.combined import SPACES
        from hlopass.sweep.jobs import module_stats, parse_task, time_limit

        with time_limit(config.timeout):
            module = parse_task(task, config.verify)
            record["before"] = module_stats(module, config.device)
            result = SPACES[self.space](module, self.pipeline, budget=self.budget, top=1,
                                        device=config.device)  # fmt: skip
            record["after"] = module_stats(result.best.module, config.device)
        g, b = result.greedy, result.best
        record["search"] = {"greedy_us": g.time_us, "best_us": b.time_us,
                            "vs_greedy": b.time_us / (g.time_us or 1e-9),
                            "decisions": b.decisions, "explored": result.explored,
                            "dropped": result.dropped, "unchecked": result.unchecked,
                            "disagreements": result.disagreements()}  # fmt: skip


def parse_spec(spec: str, budget: int = 100) -> SearchJob:
    """The job for `--search SPEC` (module docstring); a bad SPEC is a one-line error."""
    from hlopass.pipeline import parse_pass_pipeline
    from hlopass.search.combined import SPACES

    space, _, pipeline = spec.partition(":")
    space = space.strip() or DEFAULT_SPACE
    if space not in SPACES:
        raise SearchSpecError(
            f"error: unknown search space '{space}' in --search (spaces: {', '.join(SPACES)})"
        )
    pipeline = pipeline.strip() or DEFAULT_PIPELINE
    names = [p.name for p in parse_pass_pipeline(pipeline)]
    if names.count("priority-fusion") != 1:
        raise SearchSpecError("error: a --search pipeline must hold priority-fusion exactly once")
    return SearchJob(space, pipeline, budget)
