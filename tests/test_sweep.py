"""`hlopass sweep` (local process pool and Ray) and `hlopass rank FILE -p A -p B`.

A small corpus in a temp folder: two good modules, a file of two modules split by
`// -----`, a file that does not parse, and three modules a plug-in pass treats badly by
their name (it raises, sleeps past the limit, or kills its worker with `os._exit`), and a
README the sweep must leave out. Expected counts are derived by hand: `dce` removes the
dead instruction; an unfused elementwise instruction is one kernel, a parameter none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hlopass.sweep.driver import find_modules, read_results, sweep
from hlopass.sweep.table import table_rows

BIN = Path(sys.executable).parent

GOOD = """HloModule {name}

ENTRY e {{
  p0 = f32[1024]{{0}} parameter(0)
  dead = f32[1024]{{0}} exponential(p0)
  ROOT r = f32[1024]{{0}} negate(p0)
}}
"""
# What `dce` must leave of GOOD, written by hand.
GOOD_AFTER_DCE = """HloModule m

ENTRY e {
  p0 = f32[1024]{0} parameter(0)
  ROOT r = f32[1024]{0} negate(p0)
}
"""

PLUGIN = textwrap.dedent('''\
    import os
    import time
    from dataclasses import dataclass
    from typing import ClassVar

    from hlopass.rewriting import HloModulePass


    @dataclass(frozen=True)
    class TrapPass(HloModulePass):
        """Misbehaves on modules named crash_me, sleep_me, exit_me."""

        name: ClassVar[str] = "sweep-trap"

        def run(self, ctx, module, trace=None) -> bool:
            name = module.attributes["sym_name"].data
            if name == "crash_me":
                raise ValueError("trap sprung")
            if name == "sleep_me":
                time.sleep(60)
            if name == "exit_me":
                os._exit(1)
            return False
    ''')

PIPELINE = "sweep-trap,dce"
TIMEOUT = 5.0  # wide: a busy machine must not time the quick modules out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sweep")
    d = root / "corpus"
    (d / "sub").mkdir(parents=True)
    (d / "good1.hlo").write_text(GOOD.format(name="good1"))
    (d / "sub" / "good2.hlo").write_text(GOOD.format(name="good2"))
    split = GOOD.format(name="first") + "\n// -----\n\n" + GOOD.format(name="second")
    (d / "sub" / "split.hlo").write_text(split)
    (d / "bad.hlo").write_text("HloModule bad\n\nENTRY e {\n  ROOT x = f32[] bogus()\n}\n")
    for name in ("crash_me", "sleep_me", "exit_me"):
        (d / f"{name}.hlo").write_text(GOOD.format(name=name))
    (d / "README").write_text("not a module\n")
    (d / "notes.hlo").write_text("// RUN: only comments, no module\n")
    (root / "trap.py").write_text(PLUGIN)
    return root


def _keys(root: Path) -> list[str]:
    d = str(root / "corpus")
    return [os.path.join(d, k) for k in ("bad.hlo", "crash_me.hlo", "exit_me.hlo",
            "good1.hlo", "sleep_me.hlo", "sub/good2.hlo", "sub/split.hlo#0", "sub/split.hlo#1")]  # fmt: skip


def _sweep(root: Path, results: Path, engine: str = "local", **kw) -> list[dict]:
    return sweep([str(root / "corpus")], pipeline=PIPELINE, jobs=2, engine=engine,
                 results=str(results), timeout=TIMEOUT, plugins=[str(root / "trap.py")], **kw)  # fmt: skip


@pytest.fixture(scope="module")
def local_run(corpus: Path) -> tuple[list[dict], Path]:
    results = corpus / "local.jsonl"
    return _sweep(corpus, results), results


def test_finds_every_module_and_skips_non_hlo(corpus: Path) -> None:
    tasks = find_modules([str(corpus / "corpus")])
    assert [t.key for t in tasks] == _keys(corpus)
    split = [t for t in tasks if t.file.endswith("split.hlo")]
    assert [t.index for t in split] == [0, 1] and split[1].line_offset == 9


def test_each_error_is_one_line_and_the_sweep_finishes(corpus: Path, local_run) -> None:
    records, _ = local_run
    by = {os.path.relpath(r["module"], corpus / "corpus"): r for r in records}
    assert sorted(by) == sorted(os.path.relpath(k, corpus / "corpus") for k in _keys(corpus))
    errors = {k: r["error"] for k, r in by.items() if not r["ok"]}
    assert sorted(errors) == ["bad.hlo", "crash_me.hlo", "exit_me.hlo", "sleep_me.hlo"]
    assert all("\n" not in e for e in errors.values())
    assert errors["bad.hlo"].endswith("bad.hlo:4:18: error: unknown opcode 'bogus'")
    assert "pass 'sweep-trap' failed: ValueError: trap sprung" in errors["crash_me.hlo"]
    assert errors["sleep_me.hlo"].endswith(f"error: timed out after {TIMEOUT:g} s (pipeline)")
    assert errors["exit_me.hlo"].endswith("error: worker process died")
    for k in ("good1.hlo", "sub/good2.hlo", "sub/split.hlo#0", "sub/split.hlo#1"):
        r = by[k]
        assert r["ok"] and r["error"] is None
        assert (r["before"]["instructions"], r["after"]["instructions"]) == (3, 2)
        assert (r["before"]["kernels"], r["after"]["kernels"]) == (2, 1)
        assert r["after"]["time_us"] < r["before"]["time_us"]


def test_dead_worker_loses_no_finished_result(corpus: Path, local_run) -> None:
    records, results = local_run
    on_disk = read_results(str(results))
    assert len(on_disk) == len(records) == 8  # the exit_me worker died; nothing else lost
    assert {r["module"] for r in on_disk} == set(_keys(corpus))


def test_time_after_dce_is_the_hand_written_module(corpus: Path, local_run) -> None:
    import hlopass.cost

    good = next(r for r in local_run[0] if r["module"].endswith("good1.hlo"))
    assert good["after"]["time_us"] == pytest.approx(hlopass.cost.estimate(GOOD_AFTER_DCE).time_us)
    assert good["before"]["time_us"] == pytest.approx(
        hlopass.cost.estimate(GOOD.format(name="x")).time_us
    )


def test_resume_skips_recorded_modules(corpus: Path, local_run) -> None:
    records, results = local_run
    partial = corpus / "partial.jsonl"
    kept = [
        r for r in read_results(str(results)) if not r["module"].endswith(("good1.hlo", "bad.hlo"))
    ]
    partial.write_text("".join(json.dumps(r) + "\n" for r in kept) + '{"module": "torn')
    ran: list[str] = []
    again = _sweep(corpus, partial, on_record=lambda r: ran.append(r["module"]))
    assert sorted(os.path.basename(m) for m in ran) == ["bad.hlo", "good1.hlo"]
    assert [row[:4] + row[5:] for row in table_rows(again)] == \
        [row[:4] + row[5:] for row in table_rows(records)]  # fmt: skip
    ran.clear()
    _sweep(corpus, partial, on_record=lambda r: ran.append(r["module"]))
    assert ran == []


def test_ray_engine_gives_the_same_table(corpus: Path, local_run) -> None:
    import ray  # installed by the `test` extra; a missing Ray fails here, never skips

    assert not ray.is_initialized()
    records = _sweep(corpus, corpus / "ray.jsonl", engine="ray")
    assert not ray.is_initialized()  # the sweep shut down the local cluster it started

    def strip(rows: list[dict]) -> list[tuple[str, ...]]:
        return [row[:4] + row[5:] for row in table_rows(rows)]  # timings apart

    assert strip(records) == strip(local_run[0])


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "hlopass"), *args], capture_output=True, text=True,
                          timeout=120)  # fmt: skip


def test_cli_table_has_every_row_and_resumes(corpus: Path, local_run) -> None:
    results = corpus / "cli.jsonl"
    results.write_text((corpus / "local.jsonl").read_text())  # all recorded: nothing runs
    p = _cli("sweep", str(corpus / "corpus"), "-p", PIPELINE, "--jobs", "2",
             "--results", str(results), "--timeout", str(TIMEOUT),
             "--load-pass-plugin", str(corpus / "trap.py"))  # fmt: skip
    assert p.returncode == 1, p.stderr  # some modules failed
    assert p.stderr == ""  # no progress bar off a terminal, no traceback
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["module", "instructions", "kernels", "time", "us", "s", "error"]
    for k in _keys(corpus):
        assert sum(line.startswith(k + " ") for line in lines) == 1, k
    assert lines[-2].startswith("8 modules, 4 ok, 4 errors;")


def _main(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    """`hlopass ARGS` in this process (no interpreter start-up): status, stdout, stderr."""
    from hlopass.commands.cli import main

    try:
        code = main(list(args))
    except SystemExit as e:  # argparse's usage errors end the process, with status 2
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_runs_a_module(corpus: Path, capsys: pytest.CaptureFixture) -> None:
    code, out, err = _main(
        capsys, "sweep", str(corpus / "corpus" / "good1.hlo"), "-p", "dce", "-j", "1"
    )
    assert code == 0, err
    row = out.splitlines()[1].split()
    assert row[1:7] == ["3", "->", "2", "2", "->", "1"]


def test_cli_search_bad_spec_and_bad_usage(corpus: Path, capsys: pytest.CaptureFixture) -> None:
    code, out, err = _main(capsys, "sweep", str(corpus / "corpus"), "--search", "nope")
    assert (code, out) == (1, "")
    assert err == ("hlopass sweep: error: unknown search space 'nope' in --search "
                   "(spaces: fusion, algebraic, algebraic+fusion, pipeline, layout, multi-output, "
                   "collectives, all)\n")  # fmt: skip
    code, out, err = _main(capsys, "sweep", str(corpus / "corpus"), "--search", "fusion:dce")
    assert code == 1 and len(err.splitlines()) == 1
    assert err.endswith("error: a --search pipeline must hold priority-fusion exactly once\n")
    code, _, err = _main(capsys, "sweep", str(corpus / "nowhere"), "-p", "dce")
    assert code == 1 and err.strip().endswith("nowhere: error: no HLO files found")
    assert len(err.splitlines()) == 1
    code, _, err = _main(capsys, "sweep", str(corpus / "corpus"), "-p", "no-such-pass")
    assert code == 1 and "unknown pass 'no-such-pass'" in err and len(err.splitlines()) == 1
    code, _, err = _main(capsys, "sweep", str(corpus / "corpus"), "-p", "dce", "--timeout", "-1")
    assert code == 2 and "expected seconds >= 0, got '-1'" in err and len(err.splitlines()) == 1


def test_rank_pipelines_on_one_module(corpus: Path, capsys: pytest.CaptureFixture) -> None:
    import hlopass.cost

    f = str(corpus / "corpus" / "good1.hlo")
    code, out, err = _main(capsys, "rank", f, "-p", "cse", "-p", "dce")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("1. -p 'dce'  ") and "(1.00x)  1 kernels, 2 instructions" in lines[0]
    assert lines[1].startswith("2. -p 'cse'  ") and "2 kernels, 3 instructions" in lines[1]
    j = json.loads(_main(capsys, "rank", f, "-p", "cse", "-p", "dce", "--json")[1])
    assert [r["pipeline"] for r in j["ranking"]] == ["dce", "cse"]
    times = {r["pipeline"]: r["time_us"] for r in j["ranking"]}
    assert times["dce"] == pytest.approx(hlopass.cost.estimate(GOOD_AFTER_DCE).time_us)
    assert times["cse"] == pytest.approx(hlopass.cost.estimate(GOOD.format(name="x")).time_us)
    code, _, err = _main(capsys, "rank", f, f, "-p", "dce")
    assert code == 1 and len(err.splitlines()) == 1


def test_search_per_module_and_its_failures(corpus: Path, capsys: pytest.CaptureFixture) -> None:
    """`--search`: each good module's best plan is "after" (never slower than the greedy
    pipeline), the module that does not parse is its one-line error, and a search past the
    time limit is one line too; the sweep finishes either way."""
    from hlopass.search.sweep_job import parse_spec

    job = parse_spec("pipeline:dce,priority-fusion", budget=20)
    paths = [str(corpus / "corpus" / f) for f in ("good1.hlo", "bad.hlo", "sub/split.hlo")]
    records = sweep(paths, pipeline=job.label, jobs=1, timeout=60, job=job)
    by = {os.path.basename(r["module"]): r for r in records}
    assert sorted(by) == ["bad.hlo", "good1.hlo", "split.hlo#0", "split.hlo#1"]
    assert by["bad.hlo"]["error"].endswith("bad.hlo:4:18: error: unknown opcode 'bogus'")
    for k in ("good1.hlo", "split.hlo#0", "split.hlo#1"):
        r = by[k]
        assert r["ok"] and r["pipeline"] == job.label, r
        # dce removes `dead`, fusion leaves the negate: 1 kernel, as the -p sweep counts it
        assert (r["before"]["kernels"], r["after"]["kernels"]) == (2, 1)
        assert r["search"]["best_us"] <= r["search"]["greedy_us"]
        assert r["after"]["time_us"] == pytest.approx(r["search"]["best_us"])
    late = sweep(paths[:1], pipeline=job.label, jobs=1, timeout=0.001, job=job)
    assert [r["error"] for r in late] == [f"{paths[0]}: error: timed out after 0.001 s (search)"]
    code, out, err = _main(capsys, "sweep", paths[0], "--search", "pipeline:dce,priority-fusion",
                           "--budget", "5", "-j", "1")  # fmt: skip
    assert code == 0, err
    assert out.splitlines()[1].split()[1:7] == ["3", "->", "2", "2", "->", "1"]
