"""The parser keeps no process-wide cache keyed by its input (issue 14): what it memoises
(shape tokens, their IR types, metadata texts, verified shape combinations) lives on the
parser of one `parse_hlo` call, so parsing leaves the importer's module state as it was."""

from __future__ import annotations

import hlopass.text.importer as importer
from hlopass.text.exporter import print_hlo
from hlopass.text.importer import parse_hlo

# Per-opcode tables filled on first use are keyed by the opcode, not by the input text.
_KEYED_BY_OPCODE = {"_SUGAR_SPECS"}


def _module_containers() -> dict[str, int]:
    return {
        name: len(value)
        for name, value in vars(importer).items()
        if isinstance(value, dict | set | list) and name not in _KEYED_BY_OPCODE
    }


def _module(k: int) -> str:
    # Shapes, metadata and tuple shapes that no other test writes (fresh cache keys).
    return f"""HloModule cache_probe_{k}

ENTRY main {{
  p = f32[{k},3]{{1,0}} parameter(0)
  q = f32[{k},3]{{0,1}} parameter(1)
  a = f32[{k},3]{{1,0}} add(p, q), metadata={{op_type="Add" op_name="probe_{k}"}}
  i = s32[{k}]{{0}} iota(), iota_dimension=0
  t = (f32[{k},3]{{1,0}}, s32[{k}]{{0}}) tuple(a, i)
  ROOT g = f32[{k},3]{{1,0}} get-tuple-element(t), index=0
}}
"""


def test_parsing_leaves_no_process_wide_cache_entries():
    before = _module_containers()
    for k in (7001, 7002, 7003):
        print_hlo(parse_hlo(_module(k)))
    after = _module_containers()
    grown = {n: (before[n], after[n]) for n in before if after.get(n) != before[n]}
    assert not grown, f"module-level containers grew while parsing: {grown}"


def test_the_probe_can_fail(monkeypatch):
    """A process-wide cache keyed by input text is what the test above catches."""
    cache: dict[str, object] = {}
    monkeypatch.setattr(importer, "_PROBE_CACHE", cache, raising=False)
    before = _module_containers()
    cache["f32[7004,3]{1,0}"] = object()  # what such a cache would do during a parse
    after = _module_containers()
    assert before != after
