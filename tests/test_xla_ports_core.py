"""The ports of XLA's dce, cse and constant-folding unit tests (`lit_tests/xla_ports/`):
per case, the pass says it changed the module exactly when XLA's test says XLA's pass
does (`// XLA-CHANGED:`), and the module computes the same before and after.

The lit files check the text; this checks `run -> changed` (XLA's `EXPECT_TRUE/FALSE` on
`Run`) and the values: both modules run in the interpreter (checked against XLA-CPU
elsewhere) on random arguments, compared within the bound derived from the computation.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

import hlopass
from hlopass.dialects.hlo import entry_computation
from hlopass.execution.inputs import random_inputs
from hlopass.pipeline import parse_pass_pipeline
from hlopass.text.xdsl_io import context

PORTS = Path(__file__).resolve().parent.parent / "lit_tests" / "xla_ports"
FILES = ["hlo_dce_test.hlo", "hlo_cse_test.hlo", "hlo_constant_folding_test.hlo"]

NOT_RUN = re.compile(
    r"custom-call|custom_call|rng\(|infeed|outfeed|send\(|recv\(|all-reduce|token\[\]|"
    r"async-start|call-start|domain\(|opt-barrier|s4\[|:T\(|:E\(|pred\[\] constant\(true\)"
)
"""Cases the value check leaves out, by what they hold: custom-call targets and effects
(sends, feeds, rng, collectives, async pairs) have no values to compare here; sub-byte and
tiled layouts are not run by the interpreter; a while whose condition is `constant(true)`
never ends. Their text is checked by lit."""

MAX_ELEMENTS = 1_000_000
"""Cases with a larger instruction are left out of the value check (XLA's must-not-fold
cases build 10^9-element broadcasts on purpose)."""


def _cases() -> list[tuple[str, str, str, bool, str | None]]:
    """(id, text, pipeline, verify, XLA's changed) per section of the port files."""
    out = []
    for name in FILES:
        text = (PORTS / name).read_text()
        default = re.search(r"-p '([^']*)'", text)
        assert default, name
        for chunk in text.split("\n// -----\n"):
            head = re.search(r"(?m)^// XLA: ([^:(]+)", chunk)
            changed = re.search(r"(?m)^// XLA-CHANGED: (\S+)", chunk)
            assert head and changed, f"{name}: a section without its XLA header"
            spec = re.search(r"(?m)^// XLA-PASS: (.*)$", chunk)
            pipeline = spec.group(1) if spec else default.group(1)
            verify = not pipeline.endswith(" NOVERIFY")
            pipeline = pipeline.removesuffix(" NOVERIFY")
            want = changed.group(1) if changed.group(1) in ("true", "false") else None
            cid = f"{name.removesuffix('.hlo')}:{head.group(1).strip()}"
            out.append((cid, chunk, pipeline, verify, want))
    return out


CASES = _cases()


def _run(text: str, pipeline: str, verify: bool) -> tuple[ModuleOp, ModuleOp, bool]:
    before = hlopass.parse_hlo(text, "case.hlo", verify=verify)
    after = hlopass.parse_hlo(text, "case.hlo", verify=verify)
    changed = False
    for p in parse_pass_pipeline(pipeline):
        changed |= p.run(context(), after)
    return before, after, changed


def test_every_case_is_collected():
    counts = {f: sum(c[0].startswith(f.removesuffix(".hlo")) for c in CASES) for f in FILES}
    assert counts == {
        "hlo_dce_test.hlo": 30,
        "hlo_cse_test.hlo": 48,
        "hlo_constant_folding_test.hlo": 49,
    }


@pytest.mark.parametrize("cid,text,pipeline,verify,want", CASES, ids=[c[0] for c in CASES])
def test_changed_as_xla_says(cid, text, pipeline, verify, want):
    before, after, changed = _run(text, pipeline, verify)
    if want is not None:
        assert changed == (want == "true"), f"{cid}: XLA's Run returns {want}"
    # and the pass's contract: changed exactly when the printed module differs
    assert changed == (hlopass.print_hlo(before) != hlopass.print_hlo(after))


def _too_large(text: str) -> bool:
    for dims in re.findall(r"\[([0-9,]+)\]", text):
        n = 1
        for d in dims.split(","):
            n *= int(d)
        if n > MAX_ELEMENTS:
            return True
    return False


VALUE_CASES = [c for c in CASES if not NOT_RUN.search(c[1]) and not _too_large(c[1])]


@pytest.mark.parametrize(
    "cid,text,pipeline,verify,want", VALUE_CASES, ids=[c[0] for c in VALUE_CASES]
)
def test_values_kept(cid, text, pipeline, verify, want):
    before, after, _ = _run(text, pipeline, verify)
    if "remove-dead-parameters-from-entry-computation=true" in pipeline:
        # the entry lost parameters: `after` takes the arguments of those it kept
        args = random_inputs(before, 7)
        names = [p.inst_name for p in entry_computation(before).parameters()]
        kept = [args[names.index(p.inst_name)] for p in entry_computation(after).parameters()]
        want_out = hlopass.evaluate(before, *args)
        got_out = hlopass.evaluate(after, *kept)
        assert all(np.array_equal(a, b) for a, b in zip(want_out, got_out, strict=True))
        return
    result = hlopass.check_equivalent(before, after, seed=7)
    assert result, f"{cid}: {result}"
