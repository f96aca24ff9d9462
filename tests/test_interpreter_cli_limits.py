"""`hlopass run --max-iterations N`: a while loop that has not ended after N iterations is
one error line at the loop's instruction, exit 1; a loop within the limit runs as before."""

from __future__ import annotations

import re

import numpy as np
import pytest

import hlopass
from hlopass.interpreter.cli import run_main
from hlopass.interpreter.control import IterationLimitError
from hlopass.interpreter.core import interpreter_for

_LOOP = """HloModule counting

cond {
  s = s32[] parameter(0)
  n = s32[] constant(%s)
  ROOT lt = pred[] compare(s, n), direction=LT
}

body {
  s = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT a = s32[] add(s, one)
}

ENTRY e {
  z = s32[] constant(0)
  ROOT %%loop = s32[] while(z), condition=cond, body=body
}
"""
_FOREVER = _LOOP.replace("compare(s, n), direction=LT", "compare(s, s), direction=EQ")


def test_infinite_loop_is_one_line_at_the_while(tmp_path, capsys):
    src = tmp_path / "forever.hlo"
    src.write_text(_FOREVER % 5)
    assert run_main([str(src), "--max-iterations", "1000"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    line = (
        (_FOREVER % 5)
        .splitlines()
        .index("  ROOT %loop = s32[] while(z), condition=cond, body=body")
    )
    assert re.fullmatch(
        rf"{re.escape(str(src))}:{line + 1}:9: error: while loop loop did not end within "
        r"1000 iterations \(--max-iterations 1000\)",
        err,
    ), err


@pytest.mark.parametrize(("trips", "limit", "ends"), [(7, 7, True), (7, 6, False), (0, 1, True),
                                                      (1, 1, True), (2, 1, False)])  # fmt: skip
def test_limit_counts_body_runs(trips, limit, ends):
    module = hlopass.parse_hlo(_LOOP % trips)
    interpreter_for(module).max_iterations = limit
    if ends:
        assert int(hlopass.evaluate(module)[0]) == trips
    else:
        with pytest.raises(IterationLimitError, match=f"within {limit} iterations"):
            hlopass.evaluate(module)


def test_no_limit_by_default_and_within_limit_output(tmp_path, capsys):
    src = tmp_path / "count.hlo"
    src.write_text(_LOOP % 12345)
    assert interpreter_for(hlopass.parse_hlo(_LOOP % 3)).max_iterations is None
    assert run_main([str(src), "--max-iterations", "12345", "-o", str(tmp_path / "o.npz")]) == 0
    with np.load(tmp_path / "o.npz") as out:
        assert int(out["out0"]) == 12345


@pytest.mark.parametrize("bad", ["0", "-3", "x", "1.5"])
def test_bad_limit_is_one_line(tmp_path, capsys, bad):
    src = tmp_path / "count.hlo"
    src.write_text(_LOOP % 3)
    with pytest.raises(SystemExit) as e:
        run_main([str(src), "--max-iterations", bad])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "positive integer" in err
