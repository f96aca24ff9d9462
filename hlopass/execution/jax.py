"""Run hlopass pipelines inside real JAX programs (needs `jax`; the `test` extra has it).

    import hlopass.execution.jax as hj

    module = hj.lower(loss_fn, params, batch)            # the HLO JAX hands XLA, as IR
    step = hj.compile(train_step, pipeline="algsimp,dce")  # a drop-in for jax.jit(train_step)
    params, loss = step(params, batch)

`compile(fn, pipeline)` lowers `fn` with `jax.jit` for the arguments of each call (one
lowering per argument shapes and dtypes, as `jax.jit` caches), runs the pipeline on the
module, prints it and has XLA compile and run the printed module on jax's default platform
(XLA:CPU here; the GPU where jax has one). Outputs are jax arrays left on the device, as
`jax.jit` returns them. Outputs come back with `fn`'s output structure, so the
callable slots into a training loop in place of `jax.jit(fn)` and the two can be compared
for values and run time. `.module(*args)` gives the transformed module, `.runner` the last
run's instrumentation (pass log, timings with `time_passes=True`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xdsl.dialects.builtin import ModuleOp


def lower_text(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    """The HLO text `jax.jit(fn)` hands XLA for these arguments (every argument kept)."""
    import jax

    return jax.jit(fn, keep_unused=True).lower(*args, **kwargs).as_text(dialect="hlo")


def lower(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> ModuleOp:
    """`fn` lowered for these arguments, parsed into the `hlo` dialect."""
    from hlopass.text.importer import parse_hlo

    return parse_hlo(lower_text(fn, *args, **kwargs), getattr(fn, "__name__", "<jax>"))


class Compiled:
    """`fn` run through jax's lowering, an hlopass pipeline and XLA (see `compile`)."""

    def __init__(self, fn: Callable[..., Any], pipeline: str, verify_each: bool, **runner: Any):
        self.fn = fn
        self.pipeline = pipeline
        self.runner_options = dict(runner, verify_each=verify_each)
        self.runner: Any = None
        self._cache: dict[Any, tuple[Callable[[list[Any]], list[Any]], Any, ModuleOp]] = {}

    def _key(self, args: tuple[Any, ...]) -> Any:
        import jax

        leaves, tree = jax.tree_util.tree_flatten(args)
        shapes = tuple((getattr(x, "shape", ()), str(getattr(x, "dtype", type(x)))) for x in leaves)
        return tree, shapes

    def _build(
        self, args: tuple[Any, ...]
    ) -> tuple[Callable[[list[Any]], list[Any]], Any, ModuleOp]:
        import jax

        from hlopass.execution import oracle
        from hlopass.pipeline import Runner, parse_pass_pipeline
        from hlopass.text.exporter import print_hlo
        from hlopass.text.importer import parse_hlo

        lowered = jax.jit(self.fn, keep_unused=True).lower(*args)
        module = parse_hlo(lowered.as_text(dialect="hlo"), getattr(self.fn, "__name__", "<jax>"))
        if self.pipeline:
            self.runner = Runner(**self.runner_options)
            self.runner.run(parse_pass_pipeline(self.pipeline), module)
        # on jax's default platform (the GPU when there is one), outputs left on the device
        run = oracle.compile(print_hlo(module), jax.default_backend(), numpy=False)
        return run, lowered.out_tree, module

    def _entry(
        self, args: tuple[Any, ...]
    ) -> tuple[Callable[[list[Any]], list[Any]], Any, ModuleOp]:
        key = self._key(args)
        entry = self._cache.get(key)
        if entry is None:
            entry = self._cache[key] = self._build(args)
        return entry

    def __call__(self, *args: Any) -> Any:
        import jax

        run, out_tree, _ = self._entry(args)
        leaves = jax.tree_util.tree_leaves(args)
        return jax.tree_util.tree_unflatten(out_tree, run(list(leaves)))

    def module(self, *args: Any) -> ModuleOp:
        """The module as transformed by the pipeline for these arguments."""
        return self._entry(args)[2]


def compile(  # noqa: A001 - the name users expect next to jax.jit
    fn: Callable[..., Any], pipeline: str = "", *, verify_each: bool = False, **runner: Any
) -> Compiled:
    """`fn` as a callable that runs `pipeline` on its HLO before XLA compiles it."""
    return Compiled(fn, pipeline, verify_each, **runner)
