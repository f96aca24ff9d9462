"""parse_hlo, print_hlo and the pass runner pause the garbage collector themselves and give
the caller's setting back on every exit path (issue 14): enabled stays enabled, disabled
stays disabled, a caller's `gc.freeze()` is not undone, and what a parse built is aged out
of the youngest generation (so the next allocation does not scan the whole module)."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import ClassVar

import pytest

from hlopass import HloParseError, parse_hlo, print_hlo
from hlopass.pipeline import PipelineError, run_pass, run_pipeline
from hlopass.rewriting import HloModulePass

GOOD = """HloModule m

ENTRY main {
  p0 = f32[4]{0} parameter(0)
  z = f32[] constant(0)
  b = f32[4]{0} broadcast(z), dimensions={}
  a = f32[4]{0} add(p0, b)
  ROOT n = f32[4]{0} negate(a)
}
"""
BAD = GOOD.replace("negate(a)", "negate(a, ")
DEEP = (
    "HloModule m\n\nENTRY main {\n  ROOT p = "
    + "(" * 3000
    + "f32[]"
    + ")" * 3000
    + " parameter(0)\n}\n"
)


@dataclass(frozen=True)
class Boom(HloModulePass):
    """A pass that fails halfway through a pipeline."""

    name: ClassVar[str] = "boom"

    def run(self, ctx: object, module: object, trace: object = None) -> bool:
        raise RuntimeError("boom")


@pytest.fixture(params=[True, False], ids=["gc-on", "gc-off"])
def caller_gc(request: pytest.FixtureRequest) -> Iterator[bool]:
    was = gc.isenabled()
    (gc.enable if request.param else gc.disable)()
    try:
        yield request.param
    finally:
        (gc.enable if was else gc.disable)()


def _calls() -> dict[str, Callable[[], object]]:
    module = parse_hlo(GOOD)
    return {
        "parse": lambda: parse_hlo(GOOD),
        "parse-error": lambda: parse_hlo(BAD, "bad.hlo"),
        "parse-too-deep": lambda: parse_hlo(DEEP, "deep.hlo"),
        "print": lambda: print_hlo(module),
        "pipeline": lambda: run_pipeline(parse_hlo(GOOD), "algsimp,dce", verify_each=True),
        "pipeline-error": lambda: run_pass(parse_hlo(GOOD), Boom()),
    }


@pytest.mark.parametrize("what", list(_calls()))
def test_caller_setting_is_restored(caller_gc: bool, what: str) -> None:
    call = _calls()[what]
    try:
        call()
    except Exception as e:  # the error paths: the setting must come back all the same
        assert what.endswith(("error", "too-deep")), f"{what} raised {e!r}"
        assert isinstance(e, HloParseError if what.startswith("parse") else PipelineError)
    else:
        assert not what.endswith(("error", "too-deep")), f"{what} did not fail"
    assert gc.isenabled() is caller_gc


def test_callers_frozen_objects_stay_frozen() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        print_hlo(parse_hlo(GOOD))
        # still frozen (a few of them may have been freed since), and nothing of ours added
        assert frozen // 2 < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()


def test_parsed_module_is_aged_into_the_oldest_generation() -> None:
    """Left young, the module would be scanned whole by the next generation-0 collection
    (right as the collector comes back), then again by the generation-1 one."""
    assert gc.isenabled()
    text = GOOD.replace(
        "  ROOT n",
        "".join(f"  x{i} = f32[4]{{0}} multiply(a, p0)\n" for i in range(200)) + "  ROOT n",
    )
    gc.collect()
    module = parse_hlo(text)
    assert any(o is module for o in gc.get_objects(generation=2))
