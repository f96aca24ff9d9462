"""XLA's horizontal_loop_fusion_test.cc, ported to
`lit_tests/xla_ports/horizontal_loop_fusion_test.hlo`.

Per section, what XLA's test asserts: `changed` (`// XLA-CHANGED:`, under the pipeline of
`// XLA-PASS:` where the test runs more than the pass), the fusion kinds it counts
(`// XLA-KIND-COUNTS:`), the fusions in the entry (`// XLA-ENTRY-FUSIONS:`). Fusion only
moves instructions, so every changed case small enough for the interpreter gives
bit-identical outputs before and after (XLA's RunAndCompareNoHloPasses, with ErrorSpec 0).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import hlopass
from hlopass.dialects.hlo import entry_computation
from hlopass.execution.inputs import random_inputs
from hlopass.ir.shape import ArrayShape, TupleShape
from hlopass.kernel_structure.shapes import elements
from hlopass.pipeline import parse_pass_pipeline
from hlopass.text.xdsl_io import context

PORT = (
    Path(__file__).resolve().parent.parent
    / "lit_tests"
    / "xla_ports"
    / "horizontal_loop_fusion_test.hlo"
)
PIPELINE = "horizontal-fusion"
MAX_ELEMENTS = 1_000_000
"""Value checks skip modules with a larger array (interpreter time)."""


def _cases() -> list[tuple[str, str, dict[str, str]]]:
    out = []
    for chunk in PORT.read_text().split("\n// -----\n"):
        head = re.search(r"(?m)^// XLA: (\w+) ", chunk)
        assert head, "a section without its XLA header"
        facts = dict(re.findall(r"(?m)^// XLA-([A-Z-]+): (.*)$", chunk))
        assert "CHANGED" in facts, head.group(1)
        out.append((head.group(1), chunk, facts))
    return out


CASES = _cases()
IDS = [c[0] for c in CASES]


def _run(text: str, pipeline: str):
    before = hlopass.parse_hlo(text, "case.hlo")
    after = hlopass.parse_hlo(text, "case.hlo")
    changed = False
    for p in parse_pass_pipeline(pipeline):
        changed |= p.run(context(), after)
    return before, after, changed


def test_every_case_is_collected() -> None:
    assert len(CASES) == 15
    assert len(set(IDS)) == len(IDS)


@pytest.mark.parametrize("name,text,facts", CASES, ids=IDS)
def test_as_xla_says(name: str, text: str, facts: dict[str, str]) -> None:
    before, after, changed = _run(text, facts.get("PASS", PIPELINE))
    assert changed == (facts["CHANGED"] == "true"), f"{name}: XLA's Run returns {facts['CHANGED']}"
    assert changed == (hlopass.print_hlo(before) != hlopass.print_hlo(after))
    fusions = [op for op in entry_computation(after).instructions if op.opcode == "fusion"]
    if "KIND-COUNTS" in facts:
        want = {k: int(v) for k, v in (kv.split("=") for kv in facts["KIND-COUNTS"].split(","))}
        assert Counter(op.attr("kind") for op in fusions) == Counter(want), name
    if "ENTRY-FUSIONS" in facts:
        assert len(fusions) == int(facts["ENTRY-FUSIONS"]), name


def _small(module) -> bool:
    for op in entry_computation(module).instructions:
        for leaf in op.shape.leaves() if isinstance(op.shape, TupleShape) else [op.shape]:
            if isinstance(leaf, ArrayShape) and elements(leaf) > MAX_ELEMENTS:
                return False
    return True


CHANGED = [c for c in CASES if c[2]["CHANGED"] == "true" and "NOT-EVALUATED" not in c[2]]
"""`// XLA-NOT-EVALUATED:` a module the interpreter cannot run (DoFusionInsideWhileLoop loops forever)."""


@pytest.mark.parametrize("name,text,facts", CHANGED, ids=[c[0] for c in CHANGED])
def test_values_kept(name: str, text: str, facts: dict[str, str]) -> None:
    before, after, _ = _run(text, facts.get("PASS", PIPELINE))
    assert _small(before), f"{name}: every changed case here is small"
    args = random_inputs(before, 3)
    want, got = hlopass.evaluate(before, *args), hlopass.evaluate(after, *args)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, f"{name} output {k}"
        bits_g, bits_w = g.reshape(-1).view(np.uint8), w.reshape(-1).view(np.uint8)
        assert np.array_equal(bits_g, bits_w), f"{name} output {k}"
