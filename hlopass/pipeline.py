"""Pass registry and pipeline runner for `hlopass-opt -p PIPELINE`.

Pipelines use xDSL's syntax: `algsimp,constant-folding{max-elements=1000},dce,cse`.
`fixpoint{passes="algsimp,dce"}` reruns its passes until none changes the module
(XLA's `HloPassFix`, at most `max-iterations`, 25 by default).
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from argparse import Namespace
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import ArgSpec, parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError

from hlopass.dialects.hlo import ComputationOp
from hlopass.driver.named_pipelines import NAMED_PIPELINES
from hlopass.driver.registry import PASSES
from hlopass.errors import HloError
from hlopass.rewriting import HloModulePass, Scope, TraceHook


class PipelineError(HloError):
    """An unknown pass, a bad option, or a pass that broke the module."""


ALIAS_PREFIX = "hlo-"
"""`hlo-dce` names `dce` too: the names our passes have in `xdsl-opt` (see universe.py)."""


def canonical_name(name: str) -> str:
    """`hlo-dce` -> `dce` (an alias of a known pass); any other name unchanged."""
    if name not in PASSES and name.startswith(ALIAS_PREFIX) and name[len(ALIAS_PREFIX) :] in PASSES:
        return name[len(ALIAS_PREFIX) :]
    return name


FIXPOINT_LIMIT = 25
"""XLA's `HloPassFix::kDefaultIterationLimit`."""


def _context() -> Context:
    from hlopass.dialects.hlo import hlo_context

    return hlo_context()


def parse_pass_pipeline(spec: str) -> list[HloModulePass]:
    """Passes of a pipeline string; PipelineError (one line) on an unknown pass or bad option."""
    try:
        specs = list(parse_pipeline(spec))
    except ArgSpecParseError as e:
        raise PipelineError(f"error: invalid pass pipeline {spec!r}: {_first_line(e)}") from None
    out: list[HloModulePass] = []
    for s in specs:
        named = NAMED_PIPELINES.get(s.name)
        if named is None:
            out.append(_instantiate(s))
        else:  # a named pipeline is its passes, each run (and instrumented) on its own
            out += parse_pass_pipeline(expand_named(s))
    return out


def expand_named(spec: ArgSpec) -> str:
    """The pipeline string a named pipeline's spec stands for (PipelineError on bad options)."""
    named = NAMED_PIPELINES[spec.name]
    options = {k: ",".join(str(x) for x in v) for k, v in spec.parameters.items()}
    try:
        return named.expand(options)
    except HloError as e:
        raise PipelineError(str(e)) from None


def expanded_pipeline(spec: str) -> str:
    """`spec` with every named pipeline replaced by its passes (`--print-pipeline`)."""
    try:
        specs = list(parse_pipeline(spec))
    except ArgSpecParseError as e:
        raise PipelineError(f"error: invalid pass pipeline {spec!r}: {_first_line(e)}") from None
    parse_pass_pipeline(spec)  # reject unknown passes and bad options first
    return ",".join(expand_named(s) if s.name in NAMED_PIPELINES else str(s) for s in specs)


def _first_line(e: BaseException) -> str:
    lines = [ln for ln in str(e).splitlines() if ln.strip()]
    return lines[-1].strip() if lines else type(e).__name__


def _instantiate(spec: ArgSpec) -> HloModulePass:
    if canonical_name(spec.name) != spec.name:
        spec = dataclasses.replace(spec, name=canonical_name(spec.name))
    loader = find_pass(spec.name)
    if loader is None:
        raise PipelineError(
            f"error: unknown pass '{spec.name}'{did_you_mean(spec.name, PASSES)}"
            f" (known passes: {', '.join(sorted(PASSES))})"
        )
    cls = loader()
    known = {f.name for f in dataclasses.fields(cls)}
    for key in spec.parameters:
        if key.replace("-", "_") not in known:
            options = _option_names(cls)
            raise PipelineError(
                f"error: pass '{spec.name}' has no option '{key}'{did_you_mean(key, options)}"
                + (f" (options: {', '.join(options)})" if known else "")
            )
    spec = _checked_values(spec, cls)
    try:
        instance = cls.from_spec(spec)
    except (ValueError, TypeError) as e:
        raise PipelineError(f"error: bad option for pass '{spec.name}': {_first_line(e)}") from None
    if isinstance(instance, FixpointPass):
        instance.inner()  # reject bad inner pipelines before running anything
    return instance


def _checked_values(spec: ArgSpec, cls: type) -> ArgSpec:
    """`spec` with each option's values checked against its type (and converted where xDSL
    would not: `2` for a float); PipelineError naming option, value and what it expects."""
    from hlopass.driver.pass_options import OptionValueError, options_of

    given = {k.replace("_", "-"): v for k, v in spec.parameters.items()}
    params = {}
    try:
        for option in options_of(cls):
            if option.name in given:
                params[option.name] = option.convert(given[option.name])
            elif option.default is dataclasses.MISSING:
                raise OptionValueError(f"{option.name}: needs a value ({option.expected()})")
    except OptionValueError as e:
        raise PipelineError(f"error: bad option for pass '{spec.name}': {e}") from None
    return dataclasses.replace(spec, parameters=params)


def find_pass(name: str) -> Callable[[], type[HloModulePass]] | None:
    """The loader of pass `name`: ours, registered, an entry point, or another xDSL universe's."""
    from hlopass import plugins

    loader = PASSES.get(name)
    if loader is None:
        plugins.discover()
        loader = PASSES.get(name)
    if loader is None:
        loader = plugins.xdsl_universe_pass(name)
    return loader


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the closest of `choices`, or ''."""
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _option_names(cls: type) -> list[str]:
    return [f.name.replace("_", "-") for f in dataclasses.fields(cls)]


@dataclass(frozen=True)
class FixpointPass(HloModulePass):
    """Run `passes` (a pipeline string) again and again until none changes the module."""

    name: ClassVar[str] = "fixpoint"

    passes: tuple[str, ...] = ("algsimp", "constant-folding", "dce", "cse")
    """The pipeline to repeat, e.g. `passes="algsimp,dce"` (quote it when it has options)."""

    max_iterations: int = FIXPOINT_LIMIT
    """Stop after this many rounds even if the module still changes (XLA: 25)."""

    exhaustive: bool = False
    """Rerun passes on whole computations and confirm each fixed point with whole walks,
    not only around what changed (`hlopass.driver.worklist`): slower, the same module."""

    def inner(self) -> list[HloModulePass]:
        return parse_pass_pipeline(",".join(self.passes))

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        return self.iterate(module, lambda p, scope: p.run_scoped(ctx, module, scope, trace))

    def iterate(
        self,
        module: ModuleOp,
        run_one: Callable[[HloModulePass, Scope], bool],
        on_round: Callable[[int], None] | None = None,
        on_skip: Callable[[HloModulePass], None] | None = None,
    ) -> bool:
        """Rounds of `run_one(pass, scope)` over the inner passes until a round changes
        nothing; `on_round(n)` is told each round's number (1, 2, ...) before it starts.

        Each pass reruns only on the computations changed (or depending on one changed,
        see `hlopass.driver.dirty`) since its own last run, and in a computation edited through a
        tracking rewriter, starting from the instructions touched (`Scope.seeds`,
        `hlopass.driver.worklist`): elsewhere it would change nothing again (passes are
        deterministic), nor where it left its own fixed point (`Scope.settled`). A pass
        with nothing to revisit is not run; `on_skip(p)` is told of it. The passes read
        their module-wide facts from the call graph's per-computation index
        (`Scope.index`), kept current after each run."""
        from hlopass.driver.dirty import CallGraph, Dirt, add_dirt

        passes = self.inner()
        graph: CallGraph | None = None  # the call sites before the first pass runs
        dirty: list[Dirt | None] = [None] * len(passes)  # None: everything
        changed = False
        for n in range(1, self.max_iterations + 1):
            if on_round is not None:
                on_round(n)
            round_changed = False
            for i, p in enumerate(passes):
                todo = dirty[i]
                scope = Scope(exhaustive=self.exhaustive)
                if todo is not None:
                    todo = {c: ops for c, ops in todo.items() if c.parent is not None}
                    if not todo:  # nothing left that was not erased since
                        if on_skip is not None:
                            on_skip(p)
                        continue
                    scope.only = set(todo)
                    scope.seeds = {c: ops for c, ops in todo.items() if ops is not None}
                dirty[i] = {}
                if graph is None:
                    graph = CallGraph(module)
                scope.index = graph.index
                if not run_one(p, scope):
                    continue
                round_changed = True
                if not scope.tracked:
                    scope.everything = True
                now, own = graph.settle(scope, exact=not self.exhaustive)
                for j in range(len(dirty)):
                    dirty[j] = add_dirt(dirty[j], own if j == i else now)
            changed |= round_changed
            if not round_changed:
                break
        return changed


class Runner:
    """Runs passes with the CLI's instrumentation: verification, IR dumps (whole or as a diff
    of the changed computations), rewrite traces with counts, pass timings, progress."""

    def __init__(
        self,
        verify_each: bool = False,
        print_after_all: bool = False,
        print_after_change: bool | str = False,
        trace_rewrites: bool = False,
        time_passes: bool = False,
        progress: bool = False,
        out: Any = None,
        traceback: bool = False,
    ):
        from hlopass.driver import instrument

        self.ctx = _context()
        self.verify_each = verify_each
        self.print_after_all = print_after_all
        self.print_after_change = "full" if print_after_change is True else print_after_change
        """False, "full" (the whole module) or "diff" (the changed computations)."""
        self.out = out if out is not None else sys.stderr
        self.traceback = traceback
        """Print the whole traceback of a pass that crashes (as HLOPASS_TRACEBACK=1 does)."""
        self.rewrites = instrument.RewriteCounter(self.out) if trace_rewrites else None
        self.timer = instrument.PassTimer() if time_passes else None
        self.progress = instrument.Progress(self.out) if progress else None
        self.round = 0
        """The fixpoint round running now (0 outside fixpoint)."""
        self.log: list[tuple[str, bool]] = []
        """(pass name, changed) for every pass run, in order."""
        self.seconds: list[float] = []
        """The wall time of each run in `log` (0 for a fixpoint pass skipped)."""

    def run_one(self, p: HloModulePass, module: ModuleOp, scope: Scope | None = None) -> bool:
        """Run `p` on the whole module, or (from a fixpoint) on `scope`'s computations."""
        if isinstance(p, FixpointPass):
            outer = self.round
            try:
                return p.iterate(
                    module,
                    lambda inner, s: self.run_one(inner, module, s),
                    self._next_round,
                    lambda inner: self._skipped(inner, module),
                )
            finally:
                self.round = outer
        label = p.name + (f" (fixpoint round {self.round})" if self.round else "")
        if self.progress is not None:
            self.progress.current = f"pass {label}"
        before = self._print(module) if self.print_after_change == "diff" else ""
        t0 = time.perf_counter()
        try:
            if scope is None:
                changed = bool(p.run(self.ctx, module, self.rewrites))
            else:
                changed = bool(p.run_scoped(self.ctx, module, scope, self.rewrites))
        except HloError:  # the pass's own diagnostic (bad input): its one line
            raise
        except Exception as e:
            raise self._crashed(p, e) from e
        elapsed = time.perf_counter() - t0
        if self.timer is not None:
            self.timer.add(p.name, elapsed)
        self.log.append((p.name, changed))
        self.seconds.append(elapsed)
        if self.verify_each and changed:  # as XLA's pipeline: a pass that changed nothing
            # left the verified module as is; one that names what it changed left the rest so
            tracked = scope is not None and scope.tracked and not scope.everything
            only = scope.edited() if tracked else None  # type: ignore[union-attr]
            touched = None
            if tracked:  # computations edited through a tracking rewriter: what it touched
                assert scope is not None
                touched = {c: t.content for c, t in scope.touched.items() if c not in scope.changed}
            self._verify(module, f"after pass '{p.name}'", only, touched)
        self._dump(p, label, module, changed, before)
        return changed

    def _crashed(self, p: HloModulePass, e: Exception) -> PipelineError:
        """A bug in a pass: one line naming the failing line of the pass's own code, after
        the whole traceback when asked for (`--traceback`, `HLOPASS_TRACEBACK=1`)."""
        from hlopass.driver import crash

        cls = getattr(type(p), "xdsl_class", type(p))  # a plain xDSL pass: its own class
        site = crash.crash_site(e, crash.own_roots(cls))
        if crash.traceback_wanted(self.traceback):
            self.out.write(crash.format_traceback(e))
            hint = ""
        else:
            hint = "; --traceback shows the whole traceback"
        where = f" (at {site}{hint})" if site else ""
        return PipelineError(f"error: pass '{p.name}' failed: {crash.describe(e)}{where}")

    def _skipped(self, p: HloModulePass, module: ModuleOp) -> None:
        """A fixpoint pass not re-run (it would change nothing): logged and dumped as a
        run that changed nothing, so logs and dumps read the same either way."""
        label = p.name + (f" (fixpoint round {self.round})" if self.round else "")
        self.log.append((p.name, False))
        self.seconds.append(0.0)
        self._dump(p, label, module, False, "")

    @staticmethod
    def _verify(module: ModuleOp, when: str, only: set[ComputationOp] | None = None,
                touched: dict[ComputationOp, set[Operation]] | None = None) -> None:  # fmt: skip
        """Verify the module (with `only`: the module-level checks and those computations;
        with `touched`, in those of its computations, only the instructions listed)."""
        from hlopass.checking.verifier import verify_module

        try:
            verify_module(module, only, touched)
        except Exception as e:
            raise PipelineError(f"error: module does not verify {when}: {_first_line(e)}") from None

    def _next_round(self, n: int) -> None:
        self.round = n

    @staticmethod
    def _print(module: ModuleOp) -> str:
        from hlopass.text.exporter import print_hlo

        return print_hlo(module)

    def _dump(self, p: HloModulePass, label: str, module: ModuleOp, changed: bool,
              before: str) -> None:  # fmt: skip
        if self.print_after_change == "diff":
            if changed:
                from hlopass.driver.instrument import computation_diff

                print(f"// -----// IR Diff After {label} //----- //", file=self.out)
                print(computation_diff(before, self._print(module), label), file=self.out, end="")
            return
        if self.print_after_all or (self.print_after_change and changed):
            note = "" if changed else " (no change)"
            print(f"// -----// IR Dump After {label}{note} //----- //", file=self.out)
            print(self._print(module), file=self.out, end="")

    def run(self, passes: list[HloModulePass], module: ModuleOp) -> bool:
        from hlopass.ir.gcutil import gc_paused

        changed = False
        progress = self.progress if self.progress is not None else contextlib.nullcontext()
        # Passes allocate and drop many small objects next to a module of hundreds of
        # thousands: with the collector on, its older generations, which hold the whole
        # module, are traversed again and again. The caller's setting is restored after.
        with progress, gc_paused():
            if self.verify_each and passes:  # XLA's `pipeline-start` check
                self._verify(module, "before the first pass")
            for p in passes:
                changed |= self.run_one(p, module)
        return changed

    def report(self) -> str:
        """What the run ends with: rewrite counts (with --trace-rewrites) and timings."""
        parts = []
        if self.rewrites is not None:
            parts.append(self.rewrites.report())
        if self.timer is not None:
            parts.append(self.timer.report())
        return "".join(parts)


def run_pipeline(module: ModuleOp, spec: str, **options: Any) -> bool:
    """Run a pipeline string on `module` in place; True when some pass changed it."""
    return Runner(**options).run(parse_pass_pipeline(spec), module)


def runner_from_cli(args: Namespace) -> Runner:
    """One Runner for a whole `hlopass-opt` invocation (all --split-input-file chunks)."""
    from hlopass.driver.crash import request_tracebacks

    request_tracebacks(bool(getattr(args, "traceback", False)))  # plug-ins load here
    for plugin in getattr(args, "load_pass_plugin", None) or ():
        from hlopass.plugins import load_pass_plugin

        load_pass_plugin(plugin)
    return Runner(
        verify_each=bool(getattr(args, "verify_each", False)),
        print_after_all=bool(getattr(args, "print_ir_after_all", False)),
        print_after_change=getattr(args, "print_ir_after_change", False) or False,
        trace_rewrites=bool(getattr(args, "trace_rewrites", False)),
        time_passes=bool(getattr(args, "time_passes", False)),
        progress=True,
        traceback=bool(getattr(args, "traceback", False)),
    )


def run_pipeline_from_cli(module: ModuleOp, args: Namespace, runner: Runner | None = None) -> None:
    runner = runner if runner is not None else runner_from_cli(args)
    runner.run(parse_pass_pipeline(args.passes), module)


def run_pass(module: ModuleOp, what: str | ModulePass, **options: Any) -> bool:
    """Run one pass (a pipeline string such as `"algsimp{float-unsafe=true}"`, or a pass
    object, an xDSL `ModulePass` included) on `module` in place; True when it changed.
    No xDSL `Context` needed; `options` are `Runner`'s (`verify_each=True`, ...)."""
    if isinstance(what, str):
        return run_pipeline(module, what, **options)
    if not isinstance(what, HloModulePass):  # a plain xDSL pass: the same options, change
        from hlopass.plugins import as_hlo_pass  # reported by text

        cls = as_hlo_pass(type(what))
        fields = dataclasses.fields(what) if dataclasses.is_dataclass(what) else ()
        what = cls(**{f.name: getattr(what, f.name) for f in fields})
    return Runner(**options).run([what], module)


def pass_class(name: str) -> type[HloModulePass]:
    loader = find_pass(canonical_name(name))
    if loader is None:
        raise PipelineError(f"error: unknown pass '{name}'{did_you_mean(name, PASSES)}")
    return loader()


def list_passes_text() -> str:
    """One block per pass: name, summary, then its options with defaults and docs."""
    from hlopass.driver.pass_options import list_text
    from hlopass.plugins import discover

    discover()
    lines: list[str] = []
    for name, loader in sorted(PASSES.items()):
        lines += list_text(name, loader())
    for named in NAMED_PIPELINES.values():
        lines += [
            f"{named.name}: (named pipeline) {named.summary}",
            f"  device={named.default_device}",
        ]
    lines.append("")
    lines.append("hlopass-opt --help-pass NAME: a pass's whole documentation, every option in full")
    lines.append("hlopass-opt --print-pipeline -p PIPELINE: the pipeline with named ones expanded")
    return "\n".join(lines) + "\n"


def help_pass_text(name: str) -> str:
    """`hlopass-opt --help-pass NAME`: the pass's docstring and every option's, in full."""
    from hlopass.driver.pass_options import help_text

    if name in NAMED_PIPELINES:
        return NAMED_PIPELINES[name].help_text()
    try:
        cls = pass_class(name)
    except PipelineError as e:  # no input file to name: the command is where it failed
        raise PipelineError(f"hlopass-opt: {e}") from None
    return help_text(canonical_name(name), cls)
