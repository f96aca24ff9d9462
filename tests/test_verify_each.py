"""`--verify-each` checks as XLA's `HloPassPipeline` does (issue 14): once before the first
pass (its `pipeline-start` check) and after every pass that reports a change; a pass that
changed nothing leaves the verified module as it was and is not checked again."""

from __future__ import annotations

import pytest

from hlopass import parse_hlo
from hlopass.dialects.hlo import computations
from hlopass.pipeline import PipelineError, Runner, parse_pass_pipeline, run_pipeline

TEXT = """HloModule m

ENTRY main {
  p0 = f32[4]{0} parameter(0)
  z = f32[] constant(0)
  b = f32[4]{0} broadcast(z), dimensions={}
  a = f32[4]{0} add(p0, b)
  d = f32[4]{0} negate(p0)
  ROOT t = (f32[4]{0}, f32[4]{0}) tuple(a, a)
}
"""


def test_verified_first_and_after_each_changing_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    monkeypatch.setattr(
        Runner,
        "_verify",
        staticmethod(lambda module, when, only=None, touched=None: seen.append(when)),
    )
    runner = Runner(verify_each=True)
    runner.run(parse_pass_pipeline("fixpoint{passes=algsimp,dce}"), parse_hlo(TEXT))
    changed = [name for name, c in runner.log if c]
    # algsimp drops `add(p0, 0)`, dce the dead negate (and the constant, broadcast), then a
    # round where neither changes anything
    assert changed == ["algsimp", "dce"] and len(runner.log) == 4
    assert seen == ["before the first pass", "after pass 'algsimp'", "after pass 'dce'"]


def test_a_module_broken_before_the_pipeline_is_reported_as_such() -> None:
    module = parse_hlo(TEXT)
    root = computations(module)[-1].root
    root.operands = list(root.operands)[:1]  # the tuple's shape now has one element too many
    with pytest.raises(PipelineError, match="does not verify before the first pass"):
        run_pipeline(module, "dce", verify_each=True)
