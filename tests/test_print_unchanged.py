"""Refactoring guard: every corpus print and core-pipeline output byte-identical to a snapshot.

`tests/data/print_snapshot.json` holds the sha256 of what hlopass printed, on the commit
that made it, for:
- each corpus module the round-trip tests read (`hlopass.checking.corpus.modules`), in each print
  style of the exporter (`default`; `long`, the older style with typed operands; `short`)
  and the default print of the default print read back (the round-trip tests' second
  round); a module the parser refuses records the hash of its one-line error instead;
- the seeds and the JAX programs before optimization through `PIPELINE`, printed.
It checks a change that should print nothing differently (a refactoring): the expected
texts are our own, checked against XLA's by `tests/test_corpus_roundtrip.py`, not here.

An intended change of printed text regenerates it, with the reason in the commit:
`python tests/test_print_unchanged.py --update`.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections import Counter
from pathlib import Path

import pytest

from hlopass.checking.corpus import corpus_root, modules
from hlopass.errors import HloError
from hlopass.pipeline import run_pipeline
from hlopass.text.exporter import print_hlo
from hlopass.text.importer import parse_hlo

SNAPSHOT = Path(__file__).resolve().parent / "data" / "print_snapshot.json"
STYLES = ("default", "long", "short")
PIPELINE = 'call-inliner,fixpoint{passes="algsimp,constant-folding,cse,dce"}'
CORPUS_MISSING = "the HLO corpus (../shared/corpus or $HLOPASS_CORPUS) is not present"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _verify(module_id: str) -> bool:
    # the modules XLA's parser reads but its verifier refuses are read unverified there
    from tests.test_corpus_roundtrip import VERIFIER_REJECTS

    return module_id not in VERIFIER_REJECTS


def corpus_prints(root: Path) -> dict[str, dict[str, str]]:
    """Module id -> print style (and `second`) -> sha256 of the text printed."""
    out: dict[str, dict[str, str]] = {}
    seen: Counter[str] = Counter()
    for m in modules(root):
        # XLA's parser test has two cases of one name: the second is keyed `name~2`
        seen[m.id] += 1
        key = m.id if seen[m.id] == 1 else f"{m.id}~{seen[m.id]}"
        verify = _verify(m.id)
        try:
            # the corpus-relative name keeps an error's hash the same in every checkout
            module = parse_hlo(m.text, os.path.relpath(m.path, root), verify=verify)
        except HloError as e:
            out[key] = {"error": _sha(str(e))}
            continue
        prints = {style: print_hlo(module, style) for style in STYLES}
        second = print_hlo(parse_hlo(prints["default"], "<first print>", verify=verify))
        out[key] = {style: _sha(text) for style, text in prints.items()}
        out[key]["second"] = _sha(second)
    return out


def pipeline_prints(root: Path) -> dict[str, str]:
    """Module id -> sha256 of its print after `PIPELINE`."""
    out = {}
    for m in modules(root, ("seeds", "jax")):
        if m.id.startswith("jax/") and m.path.name != "before_optimizations.hlo":
            continue
        module = parse_hlo(m.text, str(m.path))
        run_pipeline(module, PIPELINE)
        out[m.id] = _sha(print_hlo(module))
    return out


def _differences(want: dict, got: dict) -> list[str]:
    lines = [f"{k}: missing now" for k in sorted(set(want) - set(got))]
    lines += [f"{k}: new (not in the snapshot)" for k in sorted(set(got) - set(want))]
    lines += [
        f"{k}: {want[k]} -> {got[k]}" for k in sorted(set(want) & set(got)) if want[k] != got[k]
    ]
    return lines


def _snapshot() -> dict:
    return json.loads(SNAPSHOT.read_text())


@pytest.fixture(scope="module")
def root() -> Path:
    found = corpus_root()
    if found is None:
        pytest.skip(CORPUS_MISSING)
    return found


def test_corpus_prints_unchanged(root):
    want = _snapshot()["corpus"]
    bad = _differences(want, corpus_prints(root))
    assert not bad, f"{len(bad)} corpus prints changed:\n" + "\n".join(bad[:40])


def test_pipeline_outputs_unchanged(root):
    snap = _snapshot()
    assert snap["pipeline_spec"] == PIPELINE, "PIPELINE changed: regenerate with --update"
    bad = _differences(snap["pipeline"], pipeline_prints(root))
    assert not bad, f"{len(bad)} pipeline outputs changed:\n" + "\n".join(bad)


def _update() -> None:
    found = corpus_root()
    if found is None:
        sys.exit(CORPUS_MISSING)
    snap = {
        "pipeline_spec": PIPELINE,
        "corpus": corpus_prints(found),
        "pipeline": pipeline_prints(found),
    }
    SNAPSHOT.write_text(json.dumps(snap, indent=1, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT}: {len(snap['corpus'])} modules, {len(snap['pipeline'])} pipelines")


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/test_print_unchanged.py --update")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    _update()
