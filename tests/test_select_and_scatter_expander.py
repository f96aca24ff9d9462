"""`select-and-scatter-expander` (XLA's SelectAndScatterExpander): on each case the
select-and-scatter is gone (an arg-select reduce-window and a scatter in its place) and no
output changes: the interpreter before and after bit for bit, and XLA:CPU on the expanded
module equal to the interpreter before. The cases cover overlapping windows (a position
selected by two windows takes both sums), padding (a padded window never selects its
pad), ties (values from a few integers: `GE` keeps the first, `GT` the last), a window of
padding only, and the select-and-scatter of a max-pool gradient in cnn_train."""

from __future__ import annotations

import numpy as np
import pytest

from hlopass.dialects.hlo import computations
from hlopass.ir.shape import ArrayShape
from hlopass.pipeline import run_pipeline
from hlopass.text.exporter import print_hlo
from hlopass.text.importer import parse_hlo
from tests.conftest import CORPUS
from tests.interp_util import assert_same


def _module(shape: str, source: str, window: str, direction: str = "GE") -> str:
    return f"""HloModule m
ge {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction={direction}
}}
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}
ENTRY e {{
  x = f32[{shape}] parameter(0)
  s = f32[{source}] parameter(1)
  z = f32[] constant(0)
  ROOT r = f32[{shape}] select-and-scatter(x, s, z), window={{{window}}}, select=ge,
    scatter=add
}}"""


CASES = [
    ("max_pool_2x2", _module("4,6", "2,3", "size=2x2 stride=2x2")),
    ("overlapping_windows", _module("4,5,1,1", "2,2,1,1", "size=2x3x1x1 stride=2x2x1x1")),
    ("padded", _module("5,5", "3,3", "size=3x3 stride=2x2 pad=1_1x1_1")),
    ("ties_last_wins", _module("6,6", "3,3", "size=2x2 stride=2x2", direction="GT")),
    ("all_pad_window", _module("2,3", "2,4", "size=1x2 stride=1x1 pad=0_0x2_0")),
    ("min_pool", _module("4,4", "3,3", "size=2x2 stride=1x1", direction="LE")),
]


def _inputs(module) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    entry = next(c for c in computations(module) if c.is_entry)
    out = []
    for p in sorted(entry.parameters(), key=lambda p: p.attr("number")):
        shape = p.shape
        assert isinstance(shape, ArrayShape)
        out.append(rng.integers(-2, 3, size=shape.dims).astype(np.float32))  # ties
    return out


def _check(name: str, text: str, args: list[np.ndarray], xla) -> str:
    import hlopass.interpreter as interp

    module = parse_hlo(text)
    want = interp.evaluate(parse_hlo(text), *args)
    assert run_pipeline(module, "select-and-scatter-expander", verify_each=True)
    out = print_hlo(module)
    assert "select-and-scatter(" not in out and " scatter(" in out, out
    assert "reduce-window(" in out, out
    for g, w in zip(interp.evaluate(parse_hlo(out), *args), want, strict=True):
        assert_same(g, w, what=f"{name} (interpreter)")
    if xla is not None:
        for g, w in zip(xla.execute(out, args), want, strict=True):
            assert_same(g, w, what=f"{name} (XLA:CPU)")
    return out


@pytest.mark.parametrize(("name", "text"), CASES, ids=[c[0] for c in CASES])
def test_expands_and_keeps_values(name: str, text: str, xla) -> None:
    _check(name, text, _inputs(parse_hlo(text)), xla)


def test_control_edges_are_left_alone() -> None:
    text = (
        _module("4,6", "2,3", "size=2x2 stride=2x2")
        .replace("  z = f32[] constant(0)\n", "  z = f32[] constant(0)\n  k = f32[] constant(1)\n")
        .replace("scatter=add\n}", "scatter=add, control-predecessors={k}\n}")
    )
    module = parse_hlo(text)
    assert not run_pipeline(module, "select-and-scatter-expander")
    assert "select-and-scatter(" in print_hlo(module)


@pytest.mark.skipif(CORPUS is None, reason="needs ../shared/corpus")
def test_cnn_train_max_pool_gradient(xla) -> None:
    from hlopass.execution.inputs import random_inputs

    assert CORPUS is not None
    text = (CORPUS / "jax" / "cnn_train" / "before_optimizations.hlo").read_text()
    _check("cnn_train", text, random_inputs(parse_hlo(text), 0), None)
