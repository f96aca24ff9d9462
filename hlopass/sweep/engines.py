"""Where a sweep's jobs run: `LocalEngine` (worker processes of this machine) or
`RayEngine` (the tasks of a Ray cluster, a local one started for the sweep when no address
is given). Both hand each record to `finished` as soon as it exists, and turn a worker that
dies or hangs into that module's error record: the sweep goes on.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hlopass.errors import HloError
from hlopass.sweep.jobs import Job, ModuleTask, SweepConfig, base_record

Finished = Callable[[dict[str, Any]], None]

HARD_LIMIT_GRACE = 10.0
"""Seconds past its own limit that a worker gets before it is killed from outside (the
in-worker timer cannot interrupt a long call into C code)."""


RAY_START_ALLOWANCE = 120.0
"""Seconds added to a Ray task's outside limit: the driver cannot see when a task starts,
only when it was submitted, and Ray may have to start (and import hlopass in) a worker
process first, which takes long on a busy machine. The in-worker timer is not affected."""


RAY_START_ATTEMPTS = 3
"""Tries at starting a local Ray cluster before giving up."""


class EngineError(HloError):
    """An engine that cannot start (Ray missing, a cluster unreachable), as one line."""


def hard_limit(config: SweepConfig) -> float | None:
    return config.timeout * 1.5 + HARD_LIMIT_GRACE if config.timeout > 0 else None


def failed(task: ModuleTask, config: SweepConfig, error: str, seconds: float) -> dict[str, Any]:
    """The record of a module whose worker never answered."""
    record = base_record(task, config)
    record["error"] = f"{task.key}: error: {error}"
    record["seconds"] = round(seconds, 3)
    return record


def worker_loop(conn: Any, job: Job, config: SweepConfig) -> None:
    """A local worker: run each task received, send back its record; None ends it."""
    while True:
        try:
            task = conn.recv()
        except (EOFError, KeyboardInterrupt):
            return
        if task is None:
            return
        try:
            conn.send(job(task, config))
        except (BrokenPipeError, OSError):  # the sweep is gone: nobody to tell
            return
        gc.collect()  # the module just dropped is a graph of cycles: free it before the next


@dataclass
class _Worker:
    process: Any
    conn: Any
    task: ModuleTask | None = None
    started: float = 0.0


@dataclass
class LocalEngine:
    """`jobs` worker processes started by a fork server that has hlopass imported already,
    so a worker replaced after a crash starts in milliseconds."""

    jobs: int
    workers: list[_Worker] = field(default_factory=list)

    def run(self, tasks: list[ModuleTask], job: Job, config: SweepConfig,
            finished: Finished) -> None:  # fmt: skip
        import multiprocessing as mp

        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["hlopass.sweep.jobs", "hlopass.pipeline", "hlopass.cost"])
        queue = list(reversed(tasks))
        try:
            for _ in range(min(self.jobs, len(tasks))):
                self.workers.append(self._start(ctx, job, config))
            while queue or any(w.task is not None for w in self.workers):
                for w in self.workers:
                    if w.task is None and queue:
                        w.task, w.started = queue.pop(), time.monotonic()
                        w.conn.send(w.task)
                self._collect(ctx, job, config, finished)
        finally:
            self._stop()

    @staticmethod
    def _start(ctx: Any, job: Job, config: SweepConfig) -> _Worker:
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=worker_loop, args=(child, job, config), daemon=True)
        proc.start()
        child.close()
        return _Worker(proc, parent)

    def _collect(self, ctx: Any, job: Job, config: SweepConfig, finished: Finished) -> None:
        """Wait a little for records; replace workers that died or ran past the limit."""
        from multiprocessing.connection import wait

        busy = [w for w in self.workers if w.task is not None]
        ready = set(wait([w.conn for w in busy] + [w.process.sentinel for w in busy], 0.5))
        limit = hard_limit(config)
        for i, w in enumerate(self.workers):
            if w.task is None:
                continue
            took = time.monotonic() - w.started
            if w.conn in ready:
                try:
                    record = w.conn.recv()
                except (EOFError, OSError):
                    record = None
                if record is not None:
                    w.task = None
                    finished(record)
                    continue
            if w.conn in ready or w.process.sentinel in ready:  # died without an answer
                w.process.join(1)
                why = "worker process died"  # as Ray says it: the tables compare equal
            elif limit is not None and took > limit:
                why = f"timed out after {config.timeout:g} s (worker killed)"
            else:
                continue
            finished(failed(w.task, config, why, took))
            self._kill(w)
            self.workers[i] = self._start(ctx, job, config)

    @staticmethod
    def _kill(w: _Worker) -> None:
        if w.process.is_alive():
            w.process.kill()
        w.process.join(5)
        w.conn.close()

    def _stop(self) -> None:
        for w in self.workers:
            try:
                if w.task is None and w.process.is_alive():
                    w.conn.send(None)
            except OSError:
                pass
        for w in self.workers:
            w.process.join(2)
            self._kill(w)
        self.workers.clear()


def ray_job(job: Job, task: ModuleTask, config: SweepConfig) -> dict[str, Any]:
    """A Ray task: one job, then the module's cycles freed before the worker's next task."""
    try:
        return job(task, config)
    finally:
        gc.collect()


@dataclass
class RayEngine:
    """Tasks on a Ray cluster (`address`, or a local one of `jobs` CPUs). At most one task
    per CPU is in flight, so a task's time counts from when it could start."""

    jobs: int
    address: str | None = None

    def _init(self) -> bool:
        """Connect (or start a local cluster); True when this sweep started Ray."""
        try:
            import ray
        except ImportError:
            raise EngineError(
                "error: --engine ray needs Ray (pip install 'hlopass[search]')"
            ) from None
        if ray.is_initialized():
            return False
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                              "configure_logging": False}  # fmt: skip
        if self.address:
            kw["address"] = self.address
        else:
            kw["num_cpus"] = self.jobs
        tries = 1 if self.address else RAY_START_ATTEMPTS
        for attempt in range(tries):
            try:
                ray.init(**kw)
                break
            except Exception as e:  # Ray gives a node 30 s to start: too few on a busy machine
                ray.shutdown()
                if attempt + 1 == tries:
                    where = self.address or "a local cluster"
                    first = (str(e).strip().splitlines() or [type(e).__name__])[0]
                    raise EngineError(f"error: cannot start Ray on {where}: {first}") from None
        return True

    def run(self, tasks: list[ModuleTask], job: Job, config: SweepConfig,
            finished: Finished) -> None:  # fmt: skip
        import ray

        started = self._init()
        try:
            self._run(ray, tasks, job, config, finished)
        finally:
            if started:
                ray.shutdown()

    def _run(self, ray: Any, tasks: list[ModuleTask], job: Job, config: SweepConfig,
             finished: Finished) -> None:  # fmt: skip
        remote = ray.remote(max_retries=0, num_cpus=1)(ray_job)
        width = max(1, int(ray.cluster_resources().get("CPU", self.jobs)))
        queue = list(reversed(tasks))
        flight: dict[Any, tuple[ModuleTask, float]] = {}
        limit = hard_limit(config)
        if limit is not None:  # counted from submission: a worker may have to start first
            limit += RAY_START_ALLOWANCE
        while queue or flight:
            while queue and len(flight) < width:
                task = queue.pop()
                flight[remote.remote(job, task, config)] = (task, time.monotonic())
            done, _ = ray.wait(list(flight), num_returns=1, timeout=0.5)
            for ref in done:
                task, t0 = flight.pop(ref)
                finished(self._get(ray, ref, task, config, time.monotonic() - t0))
            for ref, (task, t0) in list(flight.items()):
                if limit is not None and time.monotonic() - t0 > limit:
                    ray.cancel(ref, force=True)
                    del flight[ref]
                    why = f"timed out after {config.timeout:g} s (worker killed)"
                    finished(failed(task, config, why, time.monotonic() - t0))

    @staticmethod
    def _get(ray: Any, ref: Any, task: ModuleTask, config: SweepConfig,
             took: float) -> dict[str, Any]:  # fmt: skip
        try:
            return ray.get(ref)
        except ray.exceptions.WorkerCrashedError:
            return failed(task, config, "worker process died", took)
        except Exception as e:  # a Ray-level failure of this task only
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            return failed(task, config, f"ray task failed: {type(e).__name__}: {first}", took)


def make_engine(engine: str, jobs: int | None, address: str | None = None) -> Any:
    n = jobs if jobs and jobs > 0 else (os.cpu_count() or 1)
    if engine == "local":
        return LocalEngine(n)
    if engine == "ray":
        return RayEngine(n, address)
    raise EngineError(f"error: unknown engine '{engine}' (engines: local, ray)")
