"""The ports of XLA's layout-assignment tests keep values: every section of
lit_tests/xla_ports/*layout_assignment_test.hlo (the GPU pass's and the generic pass's
ports) runs before and after each pass spec of its file's RUN lines, on the interpreter
and on XLA:CPU, with seeded random inputs, and the outputs agree bit for bit (layout
assignment only relabels layouts and adds copies). The lit files check the text."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from hlopass.execution.inputs import random_inputs
from hlopass.interpreter import evaluate
from hlopass.pipeline import run_pipeline
from hlopass.text.exporter import print_hlo
from hlopass.text.importer import parse_hlo

PORTS = Path(__file__).parent.parent / "lit_tests" / "xla_ports"
FILES = sorted(PORTS.glob("*layout_assignment_test.hlo"))

SECTIONS_PER_FILE = {
    "gpu_layout_assignment_test.hlo": 45,  # 38 TEST_Fs, Elementwise as its 8 combinations
    "layout_assignment_test.hlo": 72,
}

NOT_RUNNABLE = {
    "gpu_layout_assignment_test.hlo": {
        "SameLayoutOnOperandsAndOutputsOfCubDeviceRadixSort": "custom call to CUB's sort",
        "CustomCallConstrainedAlias": "custom call dummy_call",
        "MoveToHostCustomCallConstrained": "custom call fixed_call",
        "MoveToDeviceCustomCallConstrained": "custom call fixed_call",
        "FP16ROCmConvolutionHasNCHWLayoutRDNA": "cuDNN custom call",
        "FP32ROCmConvolutionHasNCHWLayoutRDNA": "cuDNN custom call",
        "FP16ROCmConvolutionHasNHWCLayoutCDNA": "cuDNN custom call",
        "FP32ROCmConvolutionHasNCHWLayoutCDNA": "cuDNN custom call",
        "CuDNNConvolutionHasNHWCLayoutPostHopper": "cuDNN custom call",
        "F64CuDNNConvolutionHasNCHWLayoutPostHopper": "cuDNN custom call",
        "SendRcvLayout": "send/recv to another program",
        "RaggedAllToAllLayoutSetRaggedDimToMajor": "a collective over 2 replicas",
    },
    "layout_assignment_test.hlo": {
        "ConditionalAsymmetricLayout": "infeed",
        "TupleCopyOnLayoutMismatch": "infeed",
        "CustomCallNotLayoutConstrained": "custom call baz",
        "CustomCallLayoutConstrained": "custom call baz",
        "CustomCallLayoutConstrainedAndElementwise": "custom call baz",
        "CustomCallLayoutConstrainedAliasedOutput": "custom call gpu_example_custom_call",
        "CustomCallLayoutConstrainedZeroOperands": "custom call baz",
        "CustomCallLayoutConstrainedTupleOperand": "custom call baz",
        "CustomCallLayoutConstrainedTupleResult": "custom call baz",
        "LayoutConstrainedAllToAll": "a collective over replicas",
        "BreakBufferAliasAcrossInstructions": "custom call baz",
        "NestedTupleInLoop": "send/recv to another program",
        "RespectsDisableWhileLoopCopiesOperandConstraint": "custom call baz",
        "HloBufferLayoutUnconstrained": "a b(...) buffer parameter",
        "HloBufferLayoutConstrainedComputationOutput": "a b(...) buffer parameter",
        "CustomCallAliasingOperandToSimpleResult": "custom call something",
        "CustomCallAliasingOperandToTupleResult": "custom call something",
        "BufferChainLayoutConstrainedComputationInput": "a b(...) buffer parameter",
        "BufferChainLayoutConstrainedComputationOutput": "a b(...) buffer parameter",
        "BufferChainLayoutConstrainedPin": "a b(...) buffer parameter",
        "BufferChainLayoutConstrainedNotPin": "a b(...) buffer parameter",
        "BufferChainLayoutInconsistentConstrains": "a b(...) buffer parameter",
        "SharedBranchComputationMismatch": "custom call LayoutConstraint",
        "AsyncStartDoneTupleMandatoryConstraints": "an async computation the interpreter rejects",
    },
}
"""Sections neither the interpreter nor XLA:CPU can run alone, with why; the test below
checks that the interpreter indeed refuses each (so that none hides a runnable case)."""

XLA_CPU_REJECTS = {
    "AllReduceSpmd": "XLA:CPU's SPMD all-reduce asks for a rank-2 layout of an f32[2]",
    "DynamicRoot": "custom call PadToStatic",
    "AsyncStartDoneMandatoryConstraints": "copy-start",
}
"""Runnable on the interpreter, refused by XLA:CPU (before the pass as after)."""

SHRINK = {
    "ReduceOperandLayout": [("512,64,1024,32,128", "2,64,3,32,4"), ("512,1024,128", "2,3,4")],
    "ReduceOperandLayoutSmallReductionDimension": [
        ("512,16,1024,128", "2,16,3,4"), ("512,1024,128", "2,3,4"),
    ],
    "VariadicReduceSameOperandLayout": [
        ("512,16,1024,128", "2,16,3,4"), ("128,1024,16,512", "4,3,16,2"), ("512,1024,128", "2,3,4"),
    ],
    "AutoLayoutE4M3ContractingMinorFirst": [
        ("128,5120", "8,64"), ("5120,10240", "64,48"), ("128,10240", "8,48"),
    ],
    "AutoLayoutS4DotContractingMinorLhs": [
        ("5120,128", "64,8"), ("5120,10240", "64,48"), ("128,10240", "8,48"),
    ],
    "AutoLayoutS4DotContractingMinorRhs": [
        ("5120,128", "64,8"), ("5120,10240", "64,48"), ("128,10240", "8,48"),
    ],
    "AutoLayoutS4DotFollowingTheChain": [
        ("3072,128", "64,8"), ("3072,9216", "64,48"), ("128,9216", "8,48"),
    ],
    "RawConvolutionLayoutAssignment": [("1,64,64,", "1,8,8,")],
}  # fmt: skip
"""Cases whose arrays are too large to run (up to 2^37 elements), run with smaller sizes of
the same dims; the reduced sizes stay (2048 and 16 elements: the row-reduction threshold
decides as in XLA's case), so the pass makes the same decisions (the lit file checks the
full-size text)."""


def _specs(text: str) -> list[tuple[str, str]]:
    """The `-p` pipeline and the FileCheck prefix of each RUN line."""
    specs = []
    for line in text.splitlines():
        if line.startswith("// RUN:"):
            m = re.search(r"-p\s+(?:'([^']*)'|(\S+))", line)
            assert m, line
            prefix = re.search(r"--check-prefix=(\w+)", line)
            specs.append((m.group(1) or m.group(2), prefix.group(1) if prefix else "CHECK"))
    return specs


def _checked(text: str, prefix: str) -> bool:
    return re.search(rf"^// {prefix}(-[A-Z]+)?:", text, re.M) is not None


def _sections(path: Path) -> list[tuple[str, str]]:
    out = []
    for chunk in path.read_text().split("\n// -----\n"):
        m = re.search(r"^// XLA: (\w+)", chunk, re.M)
        assert m, f"a section without `// XLA:` in {path.name}"
        out.append((m.group(1), chunk))
    return out


def _cases() -> list[tuple[str, int, str, str, str]]:
    """(file, index, name, text, spec) for every section and each RUN line whose prefix
    the section checks (a section checked by none, with the first RUN line's spec)."""
    out = []
    for path in FILES:
        specs = _specs(path.read_text())
        for i, (name, text) in enumerate(_sections(path)):
            mine = [spec for spec, prefix in specs if _checked(text, prefix)] or [specs[0][0]]
            out += [(path.name, i, name, text, spec) for spec in mine]
    return out


CASES = _cases()


def _ids() -> list[str]:
    return [f"{f.split('_test')[0]}-{i}-{n}-{s}" for f, i, n, _t, s in CASES]


def _leaves(value: object) -> list[np.ndarray]:
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in _leaves(v)]
    return [np.asarray(value)]


def _bits(a: np.ndarray) -> bytes:
    """The elements' bytes in logical order (so -0.0 and 0.0, or NaN payloads, differ)."""
    return np.ascontiguousarray(a).tobytes()


def _before_after(name: str, text: str, spec: str):
    for old, new in SHRINK.get(name, []):
        assert old in text, (name, old)
        text = text.replace(old, new)
    before = parse_hlo(text, name)
    after = parse_hlo(text, name)
    run_pipeline(after, spec, verify_each=True)
    return before, parse_hlo(print_hlo(after), name)


def _runnable(file: str, name: str) -> bool:
    return name not in NOT_RUNNABLE.get(file, {})


def test_section_counts() -> None:
    """Every port file is pinned here, with its number of sections."""
    assert {p.name for p in FILES} == set(SECTIONS_PER_FILE)
    for path in FILES:
        assert len(_sections(path)) == SECTIONS_PER_FILE[path.name], path.name


@pytest.mark.parametrize(("file", "index", "name", "text", "spec"), CASES, ids=_ids())
def test_ported_case_keeps_values(file: str, index: int, name: str, text: str, spec: str) -> None:
    before, after = _before_after(name, text, spec)
    if not _runnable(file, name):
        with pytest.raises(Exception):  # noqa: B017 - whatever the interpreter raises
            evaluate(before, *random_inputs(before, seed=7))
        return
    args = random_inputs(before, seed=7)
    want = _leaves(evaluate(before, *args))
    got = _leaves(evaluate(after, *args))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, name
        assert _bits(g) == _bits(w), f"{name}: values changed\n{print_hlo(after)}"


def test_ported_cases_keep_values_on_xla_cpu(xla) -> None:
    """XLA:CPU runs each runnable section before and after (layouts dropped: XLA:CPU
    assigns its own; the copies and relabelled instructions stay) on the same inputs."""
    from tests.interp_util import xla_execute_many, xla_friendly

    cases, names = [], []
    for file, index, name, text, spec in CASES:
        if not _runnable(file, name):
            continue
        before, after = _before_after(name, text, spec)
        args = random_inputs(before, seed=7)
        if not all(isinstance(a, np.ndarray) for a in args):
            continue  # tuple parameters: the XLA:CPU runner takes arrays (interpreter above)
        cases += [(xla_friendly(print_hlo(before)), args), (xla_friendly(print_hlo(after)), args)]
        names.append(f"{file}:{index}:{name}:{spec}")
    results = xla_execute_many(cases)
    refused = set()
    for k, what in enumerate(names):
        want, got = results[2 * k], results[2 * k + 1]
        if what.split(":")[2] in XLA_CPU_REJECTS and "outputs" not in want:
            refused.add(what.split(":")[2])
            continue
        assert "outputs" in want and "outputs" in got, (what, want, got)
        w, g = _leaves(want["outputs"]), _leaves(got["outputs"])
        assert [_bits(a) for a in g] == [_bits(a) for a in w], f"{what}: values changed"
    assert refused == set(XLA_CPU_REJECTS) & {n.split(":")[2] for n in names}
    assert len(names) >= 60  # every runnable section without tuple parameters
