"""Parsing and printing never give an IR object an instance `__dict__` (see
`hlopass.ir.fields`): once asked for, every later read of the object's attributes is an
unspecialized dict lookup (the printer and the passes read an instruction name's `.data`,
a type's cached text and attribute values all the time). A materialized dict shows as a
`dict` among the object's GC referents; inline attributes show as their values."""

import gc
import subprocess
import sys
from pathlib import Path
from typing import Any

from hlopass import parse_hlo, print_hlo
from hlopass.dialects.hlo import HloOp

TEXT = """HloModule m

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

ENTRY e {
  a = f32[4,8]{1,0} parameter(0)
  b = f32[8,2]{1,0} parameter(1)
  d = f32[4,2]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_type="Dot" op_name="dot"}
  z = f32[] constant(0)
  k = f32[] constant(0)
  r = f32[4]{0} reduce(d, z), dimensions={1}, to_apply=add
  c = s32[3]{0} constant({1, 2, 3})
  t = (f32[4]{0}, s32[3]{0}) tuple(r, c)
  ROOT g = f32[4]{0} get-tuple-element(t), index=0, backend_config="{\\"x\\":\\"y\\"}"
}
"""


def _has_dict(obj: Any) -> bool:
    return any(type(r) is dict for r in gc.get_referents(obj))


def _ir_objects(module: Any) -> list[Any]:
    objs: list[Any] = []
    for op in module.walk():
        if isinstance(op, HloOp):
            objs.extend(op.properties.values())
            objs.append(op.results[0].type)
            objs.append(op.results[0].type.data)  # the shape
    return objs


def check_fresh_process() -> None:
    """The check, in a process of its own (run by the test below): CPython keeps at most
    30 attribute names per class inline, so in a process that printed many modules in
    several styles (this test session), later caches may fall back to a dict."""
    module = parse_hlo(TEXT)
    objs = _ir_objects(module)
    assert objs and not [o for o in objs if _has_dict(o)], "after the parse"
    for style in ("default", "long", "short"):
        print_hlo(module, style)  # caches texts on the attributes, types and shapes
    assert not [o for o in objs if _has_dict(o)], "after the prints"
    # (the check can fail: asking for one object's `__dict__` is caught)
    objs[0].__dict__  # noqa: B018
    assert _has_dict(objs[0])


def test_parse_and_print_leave_ir_objects_without_instance_dicts() -> None:
    code = "from tests.test_inline_fields import check_fresh_process; check_fresh_process()"
    root = Path(__file__).resolve().parent.parent
    r = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]


def test_scalar_constants_of_one_spelling_share_their_attribute() -> None:
    module = parse_hlo(TEXT)
    values = {
        op.inst_name: op.properties["value"]
        for op in module.walk()
        if getattr(op, "OPCODE", "") == "constant"
    }
    assert values["z"] is values["k"]  # `0` twice, as f32[]
    assert values["c"] is not values["z"]
    assert "z = f32[] constant(0)" in print_hlo(module)
    assert "k = f32[] constant(0)" in print_hlo(module)
