"""The whole grammar against XLA's parser and printer (jaxlib, in child processes).

One batch of XLA jobs (XLA may abort on some inputs, so it runs in children restarted
after a crash) answers every question here:
- XLA's HloOpcode list is the dialect's opcode list (a jaxlib upgrade shows what is new);
- each opcode's attribute table is the one XLA's parser declares (asked by giving it an
  unknown attribute: its error lists the allowed ones);
- every sample of `tests/grammar_samples.py` (every opcode, every attribute) prints
  byte-identical to XLA's print, and XLA reads our print back unchanged;
- with the inferable result shapes left out, our print equals XLA's print of the same text;
- async-start wrapping each opcode XLA prints with sugar prints as XLA prints it.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

import pytest

from hlopass.dialects.opcodes import COMMON_BY_NAME, MODULE_ATTRS, OPCODES
from hlopass.errors import HloError
from hlopass.execution import oracle
from hlopass.ir.attrs import METADATA_ORDER
from hlopass.text.exporter import print_hlo
from hlopass.text.grammar import render, spelling_of_enum
from hlopass.text.importer import parse_hlo
from tests.child_runner import run_batch
from tests.conftest import ORACLE_MISSING
from tests.grammar_samples import (
    ASYNC_ATTRS,
    ASYNC_MODULES,
    ASYNC_TOKEN_OPS,
    ASYNC_WRAPPED,
    BAD_COMMON,
    SAMPLES,
    async_module,
    async_of_sample,
)
from tests.grammar_strip import _INSTRUCTION, LEAVABLE, strip_shapes

ASYNC_OPCODES = [*ASYNC_WRAPPED, *ASYNC_MODULES]
_ASYNC_SAMPLES = [(k, u) for k in SAMPLES for u in (False, True) if async_of_sample(k, u)]
ROOT = Path(__file__).resolve().parent.parent
CHILD = Path(__file__).resolve().parent / "_xla_print_child.py"
needs_oracle = pytest.mark.skipif(not oracle.available(), reason=ORACLE_MISSING)

# Attributes a sample need not show, with the reason.
# Attributes XLA's parser reads and then drops (so do we): their samples print without
# them, so `hlo_attrs` cannot show them; the sample text must use them instead.
DROPPED_IN_SAMPLES = {
    "all-reduce:mode",
    "all-reduce-start:mode",
    "reduce-scatter:mode",
    "convolution:sparsity_config",  # (an empty one; the non-empty syntax is kept as given)
    "ragged-all-to-all:dimensions",
}
# Attributes a sample shows under another name.
NOT_IN_SAMPLES_OF = {
    "custom-call:to_apply": "XLA keeps it as the one called computation and prints it as "
    "called_computations (sample custom-call/to_apply)",
}
# Attributes XLA declares for every instruction: shown once, on `common-attributes`.
COMMON = {*COMMON_BY_NAME, "parameter_replication"}


def _ours(text: str) -> str:
    return print_hlo(parse_hlo(text))


def _probe(text: str, opcode: str) -> str:
    """`text` with an attribute no opcode has added to its first `opcode` instruction."""
    pat = re.compile(r"^(\s*(?:ROOT\s+)?[\w.]+ = .*? " + re.escape(opcode) + r"\(.*)$", re.M)
    m = pat.search(text)
    assert m is not None, opcode
    return text[: m.end()] + ", zz_unknown_attribute=1" + text[m.end() :]


def _sample_of(opcode: str) -> str:
    key = opcode if opcode in SAMPLES else next(k for k in SAMPLES if opcode in k)
    return SAMPLES[key]


_PROBED = {
    "all-gather-done": "all-gather-start",
    "all-reduce-done": "all-reduce-start",
    "collective-permute-done": "collective-permute-start",
    "copy-done": "copy-start",
    "send-done": "send",
    "recv-done": "recv",
    "async-update": "async-start",
    "async-done": "async-start",
}


_PROBE_MODULE = "{}\nENTRY e {{\n  ROOT p = f32[] parameter(0){}\n}}\n"


def _allowed(answer: dict) -> set[str]:
    """The attribute list of XLA's `unexpected attribute` error."""
    m = re.search(r"Allowed attributes: ([^\n]*)", answer.get("error", ""))
    assert m is not None, answer
    return set(m.group(1).split(", "))


@pytest.fixture(scope="module")
def xla(tmp_path_factory) -> dict[str, dict]:
    """Every XLA answer this module needs, from one batch of child processes."""
    if not oracle.available():
        pytest.skip(ORACLE_MISSING)
    jobs: dict[str, str] = {"opcodes": "--opcodes"}
    for key, text in SAMPLES.items():
        jobs["sample:" + key] = text
        stripped = strip_shapes(text)
        if stripped != text:
            jobs["stripped:" + key] = stripped
        for opcode in _strippable(text):
            jobs[f"strip1:{key}:{opcode}"] = strip_shapes(text, frozenset({opcode}))
    for opcode in OPCODES:
        jobs["probe:" + opcode] = _probe(_sample_of(_PROBED.get(opcode, opcode)), opcode)
    jobs["probe:module"] = _PROBE_MODULE.format("HloModule m, zz_unknown_attribute=1", "")
    jobs["probe:metadata"] = _PROBE_MODULE.format("HloModule m", ", metadata={zz_unknown=1}")
    # a conditional's attributes depend on its selector (pred or s32): ask with both
    jobs["probe2:conditional"] = _probe(SAMPLES["conditional/branches"], "conditional")
    for opcode in ASYNC_OPCODES:
        for update in (False, True):
            jobs[f"async:{opcode}:{update}"] = async_module(opcode, update)
    for key, update in _ASYNC_SAMPLES:
        jobs[f"async:{key}:{update}"] = async_of_sample(key, update)  # type: ignore[assignment]
    for key, text in ASYNC_ATTRS.items():
        jobs[f"async:attrs:{key}"] = text
    for key, text in ASYNC_TOKEN_OPS.items():
        jobs[f"async:token:{key}"] = text
    for key, text in BAD_COMMON.items():
        jobs["bad:" + key] = text
    for i, inst in enumerate(_XLA_INFERS_INVALID):
        jobs[f"invalid-inferred:{i}"] = "--compile\n" + _one_inst(inst)
    ours = {}
    for key, text in SAMPLES.items():
        ours["ours:" + key] = _ours(text)
    for key, text in list(jobs.items()):
        if key.startswith("async:"):
            ours["ours:" + key] = _ours(text)
    jobs.update({"reprint:" + k[5:]: v for k, v in ours.items()})
    keys = list(jobs)
    manifest = tmp_path_factory.mktemp("grammar") / "jobs.json"
    manifest.write_text(json.dumps([jobs[k] for k in keys]))
    answers = run_batch(CHILD, str(manifest), len(keys), timeout=600)
    out = dict(zip(keys, answers, strict=True))
    out.update({k: {"print": v} for k, v in ours.items()})
    return out


def _diff(want: str, got: str) -> str:
    return "\n".join(list(difflib.unified_diff(want.splitlines(), got.splitlines(), n=1))[:30])


@needs_oracle
def test_opcodes_are_xlas(xla):
    xla_names = set(xla["opcodes"]["opcodes"])
    ours = spelling_of_enum()
    assert sorted(xla_names - set(ours)) == [], "opcodes of XLA's list hlopass does not know"
    assert sorted(set(ours) - xla_names) == [], "opcodes hlopass knows that XLA does not"


@needs_oracle
@pytest.mark.parametrize("opcode", sorted(OPCODES))
def test_attribute_table_is_xlas(xla, opcode):
    answer = xla["probe:" + opcode]
    m = re.search(r"Allowed attributes: ([^\n]*)", answer.get("error", ""))
    assert m is not None, answer
    allowed = set(m.group(1).split(", "))
    if opcode == "conditional":
        m2 = re.search(r"Allowed attributes: ([^\n]*)", xla["probe2:conditional"]["error"])
        assert m2 is not None
        allowed |= set(m2.group(1).split(", "))
    spec = OPCODES[opcode]
    ours = {*spec.by_name, *COMMON} - {"number", "value"}
    assert sorted(allowed ^ ours) == []
    # Our parser names the attributes the opcode takes when it meets an unknown one.
    with pytest.raises(HloError, match=r"unknown attribute 'zz_unknown_attribute' for "):
        parse_hlo(_probe(_sample_of(_PROBED.get(opcode, opcode)), opcode))


@needs_oracle
@pytest.mark.parametrize("key", list(SAMPLES))
def test_sample_prints_as_xla(xla, key):
    want = xla["sample:" + key]
    assert "print" in want, f"XLA rejects the sample: {want}"
    got = xla["ours:" + key]["print"]
    assert got == want["print"], _diff(want["print"], got)
    back = xla["reprint:" + key]
    assert back.get("print") == got, f"XLA does not read our print back: {back}"


def _strippable(text: str) -> list[str]:
    """The opcodes of `text` whose result shape the inference tests leave out."""
    found = {m.group(3) for m in _INSTRUCTION.finditer(text)} & LEAVABLE
    return sorted(o for o in found if strip_shapes(text, frozenset({o})) != text)


def _check_inferred(want: dict, text: str) -> None:
    """Our print of `text` (shapes left out) is XLA's; where XLA cannot infer a shape we
    refuse it too, in one line, at the same instruction (line) as XLA."""
    if "print" not in want:
        m = re.search(
            r"was parsing (\d+):\d+: error: (cannot|failed to) infer shape", want["error"]
        )
        assert m is not None, want
        with pytest.raises(HloError) as e:
            parse_hlo(text)
        msg = str(e.value)
        # (XLA points a failed inference at the token after the instruction)
        line = m.group(1) if m.group(2) == "cannot" else r"\d+"
        assert re.match(rf"^<input>:{line}:\d+: error: cannot infer the shape of ", msg), (
            msg,
            want["error"],
        )
        assert "\n" not in msg
        return
    got = _ours(text)
    assert got == want["print"], _diff(want["print"], got)


@needs_oracle
@pytest.mark.parametrize("key", [k for k in SAMPLES if strip_shapes(SAMPLES[k]) != SAMPLES[k]])
def test_left_out_shapes_are_inferred_as_xla(xla, key):
    """Every result shape but those of parameters and constants left out: where XLA infers
    them, our print is XLA's; where XLA cannot, we report it too."""
    _check_inferred(xla["stripped:" + key], strip_shapes(SAMPLES[key]))


_STRIP1 = [(k, o) for k, text in SAMPLES.items() for o in _strippable(text)]


@needs_oracle
@pytest.mark.parametrize(("key", "opcode"), _STRIP1, ids=[f"{k}:{o}" for k, o in _STRIP1])
def test_one_left_out_shape_is_inferred_as_xla(xla, key, opcode):
    """Only `opcode`'s result shapes left out (so an opcode after one XLA cannot infer is
    checked too, such as a recv-done after its recv)."""
    text = strip_shapes(SAMPLES[key], frozenset({opcode}))
    _check_inferred(xla[f"strip1:{key}:{opcode}"], text)


@needs_oracle
def test_inferred_opcodes_are_the_ones_xla_infers(xla):
    """The opcodes whose shape may be left out (docs/GRAMMAR.md's *shape* column) are those
    XLA's parser infers on the samples; every other opcode (but parameter and constant)
    XLA refuses."""
    from hlopass.shape_inference import INFERRED, NEEDS_SHAPE

    infers: dict[str, bool] = {}
    for key, opcode in _STRIP1:
        ok = "print" in xla[f"strip1:{key}:{opcode}"]
        infers[opcode] = infers.get(opcode, False) or ok
    assert set(infers) == set(OPCODES) - {"parameter", "constant"}
    xla_infers = {o for o, ok in infers.items() if ok}
    assert sorted(xla_infers ^ (INFERRED - set(NEEDS_SHAPE))) == []


@needs_oracle
def test_module_attributes_are_xlas_and_have_samples(xla):
    """XLA's module header attributes are the importer's, and a sample uses each one."""
    allowed = _allowed(xla["probe:module"])
    assert sorted(allowed ^ set(MODULE_ATTRS)) == []
    used = set()
    for text in SAMPLES.values():
        header = text.split("\n", 1)[0]
        used |= set(re.findall(r", ([\w\-]+)=", header))
    assert sorted(allowed - used) == []


@needs_oracle
def test_metadata_fields_are_xlas_and_have_samples(xla):
    """Every field XLA's metadata parser reads is printed by a sample (through stack frame
    tables for stack_frame_id)."""
    allowed = _allowed(xla["probe:metadata"])
    assert sorted(allowed - set(METADATA_ORDER)) == []
    used = set()
    for text in SAMPLES.values():
        for body in re.findall(r"metadata=\{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\}", text):
            used |= set(re.findall(r"(?:^|\s)([a-z_]+)=", body))
    assert sorted(allowed - used) == []


def test_dropped_attributes_have_samples():
    for pair in DROPPED_IN_SAMPLES:
        opcode, name = pair.split(":")
        line = re.compile(rf" {re.escape(opcode)}\(.*\b{name}=")
        assert any(line.search(t) for t in SAMPLES.values()), pair


def test_every_opcode_and_attribute_has_a_sample():
    used: dict[str, set[str]] = {o: set() for o in OPCODES}
    for text in SAMPLES.values():
        for comp in parse_hlo(text).body.block.ops:
            for op in comp.instructions:  # type: ignore[attr-defined]
                used[op.opcode].update(a.name for a, _ in op.hlo_attrs())
    missing = {
        o: sorted(
            a
            for a in {*s.by_name} - used[o] - {"number", "value"}
            if f"{o}:{a}" not in NOT_IN_SAMPLES_OF and f"{o}:{a}" not in DROPPED_IN_SAMPLES
        )
        for o, s in OPCODES.items()
    }
    assert {o: m for o, m in missing.items() if m} == {}
    assert COMMON_BY_NAME.keys() <= used["add"]
    assert "parameter_replication" in used["parameter"]


@needs_oracle
@pytest.mark.parametrize("opcode", ASYNC_OPCODES)
@pytest.mark.parametrize("update", [False, True])
def test_async_sugar_prints_as_xla(xla, opcode, update):
    want = xla[f"async:{opcode}:{update}"]
    assert "print" in want, want
    got = xla[f"ours:async:{opcode}:{update}"]["print"]
    assert got == want["print"], _diff(want["print"], got)
    back = xla[f"reprint:async:{opcode}:{update}"]
    if update and f"{opcode}-start" in OPCODES:
        # XLA prints the update as `X-update`, which its parser does not know when
        # `X-start` is an opcode of its own (no async sugar then): XLA cannot read its
        # own print back, so neither ours (the same text).
        assert f"Unknown opcode: {opcode}-update" in back.get("error", ""), back
        return
    if opcode in ("send", "recv"):
        # Likewise `send-start`/`recv-start`: XLA's parser takes no async sugar for them.
        assert f"Unknown opcode: {opcode}-start" in back.get("error", ""), back
        return
    assert back.get("print") == got, f"XLA does not read our print back: {back}"


# Why XLA cannot read back its own print of some sugared async ops (ours is the same text).
_XLA_CANNOT_READ_ITS_PRINT = (
    r"Unknown opcode: [a-z\-]+-update",  # X-update where X-start is an opcode of its own
    r"expects '\(' before constant literal",  # constant-start
    r"attribute (statistics|sharding) already exists",  # the start's and the wrapped op's
)


@needs_oracle
@pytest.mark.parametrize(
    ("key", "update"),
    _ASYNC_SAMPLES,
    ids=[f"{k}:{'update' if u else 'done'}" for k, u in _ASYNC_SAMPLES],
)
def test_async_sugar_of_every_sample_prints_as_xla(xla, key, update):
    """Every sample's ROOT (every opcode, every attribute) wrapped in async-start/-update/
    -done: XLA prints it as `X-start`/`X-update`/`X-done` with the wrapped attributes; so do
    we, and XLA reads our print back wherever it reads its own."""
    _check_async(xla, f"async:{key}:{update}")


@needs_oracle
@pytest.mark.parametrize("key", list(ASYNC_ATTRS))
def test_async_sugar_common_attributes_print_as_xla(xla, key):
    """Sharding, frontend_attributes, statistics, metadata, ... on the wrapped instruction,
    the start and the done of a sugared async op print where XLA prints them."""
    _check_async(xla, f"async:attrs:{key}")


@needs_oracle
@pytest.mark.parametrize("key", list(ASYNC_TOKEN_OPS))
def test_async_sugar_of_token_ops_prints_as_xla(xla, key):
    _check_async(xla, f"async:token:{key}")


def _check_async(xla: dict[str, dict], job: str) -> None:
    want = xla[job]
    assert "print" in want, want
    got = xla["ours:" + job]["print"]
    assert got == want["print"], _diff(want["print"], got)
    back = xla["reprint:" + job]
    if "print" not in back:
        err = back.get("error", "")
        assert any(re.search(p, err) for p in _XLA_CANNOT_READ_ITS_PRINT), back
        return
    # XLA reads the sugar back (not always to the same text: a sugared start's sharding is
    # the start's, on its tuple); so do we.
    assert _ours(got) == back["print"], _diff(back["print"], _ours(got))


# Shape-less instructions for which XLA's parser infers a shape its own verifier rejects
# (it reads a broadcast's `dimensions` as the sizes of new leading dimensions): we refuse.
_XLA_INFERS_INVALID = [
    "ROOT r = broadcast(p), dimensions={1,2}",
    "ROOT r = broadcast(p), dimensions={0}",
    "ROOT r = broadcast(p), dimensions={0,1}",
]


def _one_inst(inst: str) -> str:
    return f"HloModule m\n\nENTRY e {{\n  p = f32[2,3] parameter(0)\n  {inst}\n}}\n"


@needs_oracle
@pytest.mark.parametrize("i", range(len(_XLA_INFERS_INVALID)))
def test_shape_xla_infers_but_rejects_is_refused(xla, i):
    want = xla[f"invalid-inferred:{i}"]
    assert "print" in want and want["compiles"] is False, want
    with pytest.raises(HloError) as e:
        parse_hlo(_one_inst(_XLA_INFERS_INVALID[i]), "v.hlo")
    assert re.match(r"^v\.hlo:5:\d+: error: cannot infer the shape of r: ", str(e.value))


@needs_oracle
@pytest.mark.parametrize("key", list(BAD_COMMON))
def test_malformed_common_attribute_is_refused_as_xla(xla, key):
    assert "error" in xla["bad:" + key], xla["bad:" + key]
    with pytest.raises(HloError) as e:
        parse_hlo(BAD_COMMON[key], "b.hlo")
    msg = str(e.value)
    assert re.match(r"^b\.hlo:4:\d+: error: ", msg) and "\n" not in msg, msg


def test_unknown_attribute_error_names_the_attributes():
    text = "HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT t = f32[4] reverse(p), dims={0}\n}\n"
    with pytest.raises(HloError) as e:
        parse_hlo(text, "t.hlo")
    msg = str(e.value)
    assert msg.startswith("t.hlo:4:31: error: unknown attribute 'dims' for reverse; it takes ")
    assert "dimensions" in msg and "\n" not in msg


@pytest.mark.parametrize(
    ("inst", "why"),
    [
        ("c = convert(p)", "XLA's parser needs the result shape of convert written"),
        ("c = opt-barrier(p)", "XLA's unary shape inference does not know opt-barrier"),
        ("c = add(p, q)", "add operands have incompatible shapes f32[4] and f32[3]"),
        ("c = transpose(p), dimensions={1,0}", "are not a permutation"),
    ],
)
def test_cannot_infer_is_one_line(inst, why):
    text = f"HloModule m\nENTRY e {{\n  p = f32[4] parameter(0)\n  q = f32[3] parameter(1)\n  ROOT {inst}\n}}\n"
    with pytest.raises(HloError) as e:
        parse_hlo(text, "h.hlo")
    msg = str(e.value)
    assert msg.startswith("h.hlo:5:") and ": error: cannot infer the shape of c: " in msg
    assert why in msg and "\n" not in msg


def test_grammar_page_is_current():
    page = (ROOT / "docs" / "GRAMMAR.md").read_text()
    assert page == render(), "run `python -m hlopass.text.grammar > docs/GRAMMAR.md`"


@needs_oracle
def test_grammar_page_lists_xlas_opcodes(xla):
    """The checked-in page has one row per opcode of XLA's HloOpcode enum, no more."""
    page = (ROOT / "docs" / "GRAMMAR.md").read_text()
    rows = re.findall(r"^\| `([a-z0-9\-]+)` \|", page, re.M)
    spelled = spelling_of_enum()
    xla_names = xla["opcodes"]["opcodes"]
    assert all(n in spelled for n in xla_names), [n for n in xla_names if n not in spelled]
    assert sorted(rows) == sorted(spelled[n] for n in xla_names)


def test_interpreter_knows_every_opcode():
    """Each opcode runs in the interpreter or is listed as unsupported with its reason."""
    from hlopass.interpreter import HANDLERS
    from hlopass.interpreter.coverage import BUILT_IN, UNSUPPORTED

    unknown = sorted(o for o in OPCODES if o not in HANDLERS and o not in BUILT_IN)
    assert [o for o in unknown if not UNSUPPORTED.get(o)] == []


def test_inference_on_mangled_attributes_is_one_line():
    """Integer lists and integers of every sample, with the shapes left out, replaced by
    seeded random ones: the parse succeeds or fails with one `file:line:col: error:` line,
    never another exception."""
    import random

    rng = random.Random(17)
    ints = re.compile(r"(?<==)\{(-?\d+(?:,-?\d+)*)\}|(?<==)(-?\d+)\b")

    def mangle(m: re.Match[str]) -> str:
        if m.group(1) is not None:
            n = rng.randint(0, 3)
            return "{" + ",".join(str(rng.randint(-1, 4)) for _ in range(n)) + "}"
        return str(rng.randint(-1, 9))

    for key, text in SAMPLES.items():
        for _ in range(4):
            mangled = ints.sub(mangle, strip_shapes(text))
            try:
                parse_hlo(mangled, "m.hlo")
            except HloError as e:
                msg = str(e)
                assert msg.startswith("m.hlo:") and "\n" not in msg, (key, msg)
