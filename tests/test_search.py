"""hlopass.search: strategies within their budgets, the fusion space's plans valid and
value-keeping, the best plan never slower than greedy, a plan beam search finds where XLA's
greedy priority fusion does not, and the command's output and errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import hlopass
from hlopass.checking.equivalence import check_equivalent
from hlopass.search import (
    STRATEGIES,
    Budget,
    Choice,
    FusionSpace,
    Priced,
    SearchError,
    SearchSpace,
    search,
)
from hlopass.search.space import Decisions

DATA = Path(__file__).parent / "data"
BIN = Path(sys.executable).parent
LOG_SOFTMAX = DATA / "search_log_softmax.hlo"
PIPELINE = "call-inliner,algsimp,constant-folding,dce,cse,priority-fusion,multi-output-fusion"


class TrapSpace(SearchSpace):
    """Three decisions; each alone is slower than the root, `a` and `b` together are much
    faster: hill climbing stops at the root, a beam of two finds {a, b}."""

    name = "trap"
    PRICES = {"": 10.0, "a": 11.0, "b": 10.5, "c": 12.0, "ab": 5.0, "ac": 13.0, "bc": 13.0,
              "abc": 14.0}  # fmt: skip

    def __init__(self) -> None:
        self.priced: list[Decisions] = []

    def price(self, decisions: Decisions) -> Priced:
        self.priced.append(decisions)
        key = "".join(sorted(decisions))
        choices = [Choice(d, i) for i, d in enumerate("abc") if d not in decisions]
        return Priced(decisions, self.PRICES[key], choices=choices)

    def build(self, decisions: Decisions) -> None:
        raise AssertionError("strategies never build")


def test_beam_finds_what_hill_climbing_misses():
    g = STRATEGIES["greedy"](TrapSpace(), Budget(100))
    b = STRATEGIES["beam"](TrapSpace(), Budget(100), width=2)
    assert min(p.time_us for p in g) == 10.0
    assert min(b, key=lambda p: p.time_us).decisions == frozenset("ab")


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
@pytest.mark.parametrize("plans", [1, 2, 5])
def test_budget_is_respected(strategy, plans):
    space = TrapSpace()
    out = STRATEGIES[strategy](space, Budget(plans), width=2)
    assert len(space.priced) == len(out) <= plans
    assert len(set(space.priced)) == len(space.priced)  # never priced twice
    assert space.priced[0] == frozenset()  # the greedy plan first


def _module(path: Path):
    return hlopass.parse_hlo(path.read_text(), str(path))


def test_beam_beats_greedy_priority_fusion():
    """Leaving one of XLA's fusions out (a plan that prices slower on its own) lets
    multi-output fusion merge more, which the estimate of the built module prices faster."""
    m = _module(LOG_SOFTMAX)
    r = search(m, "priority-fusion,multi-output-fusion", budget=30, top=1)
    assert r.best is not r.greedy and r.best.decisions
    assert r.best.time_us < r.greedy.time_us
    # the estimate of what was built, not the search's own bookkeeping
    assert hlopass.cost.estimate(r.best.module).time_us == pytest.approx(r.best.time_us)
    assert check_equivalent(m, r.best.module)


@pytest.mark.parametrize("program", ["softmax_xent", "mlp_adam"])
def test_plans_keep_values_and_never_lose_to_greedy(corpus, program):
    path = Path(corpus) / "jax" / program / "before_optimizations.hlo"
    m = _module(path)
    r = search(m, PIPELINE, budget=8, top=2, finalists=2)
    assert r.explored <= 8
    greedy = hlopass.parse_hlo(hlopass.print_hlo(m))
    hlopass.run_pipeline(greedy, PIPELINE)
    assert r.greedy.time_us == pytest.approx(hlopass.cost.estimate(greedy).time_us)
    assert r.best.time_us <= r.greedy.time_us
    for p in r.plans:
        again = hlopass.parse_hlo(hlopass.print_hlo(p.module))  # prints and re-parses
        result = check_equivalent(m, again, seed=1)
        assert result, f"{p.decisions}: {result}"


class WrongSpace(FusionSpace):
    """Every alternative plan computes a log where the module computes an exp."""

    def build(self, decisions: Decisions):
        if not decisions:
            return super().build(decisions)
        text = hlopass.print_hlo(super().build(decisions)).replace("exponential(", "log(")
        return hlopass.parse_hlo(text)


def test_plans_that_change_values_are_dropped():
    r = search(_module(LOG_SOFTMAX), "priority-fusion", budget=10, top=2, finalists=3,
               space=WrongSpace)  # fmt: skip
    assert r.dropped == 3
    assert [p.decisions for p in r.plans] == [[]]


def test_bad_requests_are_one_line_errors():
    m = _module(LOG_SOFTMAX)
    with pytest.raises(SearchError, match="priority-fusion exactly once"):
        search(m, "dce,cse")
    with pytest.raises(SearchError, match="unknown strategy"):
        search(m, "priority-fusion", strategy="anneal")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "hlopass"), "search", *args], capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def test_cli_writes_plans_xla_parses(tmp_path, xla):
    out = tmp_path / "plans"
    p = _cli(str(LOG_SOFTMAX), "-p", "priority-fusion,multi-output-fusion", "--budget", "20",
             "--top", "2", "-o", str(out))  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "): keep:" in p.stdout and "the greedy plan" in p.stdout
    files = sorted(out.glob("plan_*.hlo"))
    assert len(files) == 3
    code = (
        "import sys\nfrom hlopass.execution import oracle\nfor f in sys.argv[1:]:\n"
        "    ok, why = oracle.accepts(open(f).read())\n    print(f, ok, why.splitlines()[:1])"
    )
    # XLA's parser in a child process: XLA may abort
    child = subprocess.run([sys.executable, "-c", code, *map(str, files)], capture_output=True,
                           text=True, timeout=300)  # fmt: skip
    verdicts = child.stdout.splitlines()
    assert len(verdicts) == len(files), child.stderr[-1000:]
    assert all(" True " in v for v in verdicts), verdicts


@pytest.mark.parametrize(
    "args, message",
    [
        (["-p", "dce"], "priority-fusion exactly once"),
        (["-p", "priority-fusion", "--budget", "0"], "at least 1"),
    ],
)
def test_cli_errors(args, message, capsys):
    from hlopass.commands.cli import main

    assert main(["search", str(LOG_SOFTMAX), *args]) == 1
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], err


def test_cli_bad_input_is_one_located_line(tmp_path, capsys):
    from hlopass.commands.cli import main

    bad = tmp_path / "bad.hlo"
    bad.write_text(
        "HloModule x\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(q)\n}\n"
    )
    assert main(["search", str(bad), "-p", "priority-fusion"]) == 1
    assert capsys.readouterr().err.strip() == f"{bad}:4:26: error: instruction 'q' is not defined"
    assert main(["search", str(tmp_path / "missing.hlo"), "-p", "priority-fusion"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot read file" in err


def test_every_flag_has_help():
    from hlopass.search.cli import build_parser

    parser = build_parser()
    for action in parser._actions:
        assert action.help, action.option_strings or action.dest


def _priced(space: FusionSpace, decisions: Decisions) -> tuple:
    p = space.price(decisions)
    return p.time_us, p.by_model, [(c.decision, c.score) for c in p.choices], p.kernels


def test_prices_kept_across_plans_change_no_plan():
    """One space prices every plan of a beam run from answers kept by kernel structure and a
    copy of its seeded graph; a fresh space per plan (nothing kept) must price each the
    same, to the last bit, with the same choices."""
    m = _module(LOG_SOFTMAX)
    shared = FusionSpace(m)
    plans = STRATEGIES["beam"](shared, Budget(30))
    assert len(plans) > 5
    for p in plans:
        assert _priced(FusionSpace(m), p.decisions) == (
            p.time_us,
            p.by_model,
            [(c.decision, c.score) for c in p.choices],
            p.kernels,
        ), sorted(p.decisions)


def test_plans_with_the_same_steps_share_a_key():
    m = _module(LOG_SOFTMAX)
    space = FusionSpace(m)
    plans = STRATEGIES["beam"](space, Budget(30))
    by_key: dict = {}
    for p in plans:
        by_key.setdefault(space.plan_key(p.decisions), []).append(p)
    assert len(by_key) > 1
    for same in by_key.values():  # the same steps: the same kernels, so the same prices
        assert len({(p.time_us, p.kernels) for p in same}) == 1


class OneModuleSpace(FusionSpace):
    """Claims that every plan builds the greedy module: the search builds it once."""

    builds = 0

    def plan_key(self, decisions: Decisions):
        return frozenset()

    def build(self, decisions: Decisions):
        OneModuleSpace.builds += 1
        return super().build(decisions)


def test_plans_building_the_same_module_are_built_once():
    OneModuleSpace.builds = 0
    r = search(_module(LOG_SOFTMAX), "priority-fusion,multi-output-fusion", budget=10, top=2,
               finalists=3, space=OneModuleSpace)  # fmt: skip
    assert OneModuleSpace.builds == 1
    assert len(r.plans) == 3 and r.dropped == 0
    assert {p.time_us for p in r.plans} == {r.greedy.time_us}
    assert len({id(p.module) for p in r.plans}) == 3  # each plan owns its copy
    texts = {hlopass.print_hlo(p.module) for p in r.plans}
    assert len(texts) == 1
