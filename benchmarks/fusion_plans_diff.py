"""Save the fusion pipeline's output on the corpus, or compare two saved sets.

The speed work on the fusion passes must not change plans: save the outputs from the code
before a change, again after, and compare. Each module (every corpus JAX program, both
seeds defused, Llama 3.1 8B, Mixtral 8x7B) runs fusion_vs_xla's pipeline in this process;
`save` writes `<name>.hlo` and each pass's CPU seconds (`times_*.json`); `diff` says per
module `identical`, `renamed-equal` (equal once every name is replaced by its order of
first appearance) or `DIFFERENT`, and exits 1 on any difference.

    python benchmarks/fusion_plans_diff.py save OUTDIR [--only SUBSTRING]
    python benchmarks/fusion_plans_diff.py diff BEFORE AFTER
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
sys.path.insert(0, str(ROOT / "benchmarks"))
NAME = re.compile(r"%?[A-Za-z_][\w.\-]*")


def modules() -> Iterator[tuple[str, Path, bool]]:
    for p in sorted((CORPUS / "jax").iterdir()):
        if p.is_dir():
            yield "jax_" + p.name, p / "before_optimizations.hlo", False
    yield "seed000", CORPUS / "seeds/000_887393ea171d6a40.hlo", True
    yield "seed001", CORPUS / "seeds/001_c2c20f964a2c12a7.hlo", True
    tests = CORPUS / "xla_tests"
    yield "llama", tests / "tools__benchmarks__hlo__hlo_llama31_8b_bf16_1x8.hlo", False
    yield "mixtral", tests / "tools__benchmarks__hlo__hlo_mixtral_8x7b_bf16_2x8.hlo", False


def save(out: Path, only: str) -> None:
    from fusion_vs_xla import PIPELINE

    from hlopass.pipeline import run_pipeline
    from hlopass.text.exporter import print_hlo
    from hlopass.text.importer import parse_hlo

    out.mkdir(parents=True, exist_ok=True)
    times: dict[str, dict[str, float]] = {}
    for name, path, defuse in modules():
        if only and only not in name:
            continue
        m = parse_hlo(path.read_text(), str(path))
        t: dict[str, float] = {}
        for p in (["defuse"] if defuse else []) + PIPELINE.split(","):
            c = time.process_time()
            run_pipeline(m, p)
            t[p] = time.process_time() - c
        (out / f"{name}.hlo").write_text(print_hlo(m))
        times[name] = t
        print(name, {k: round(v, 2) for k, v in t.items()}, flush=True)
        (out / f"times_{only or 'all'}.json").write_text(json.dumps(times, indent=1))


def canon(text: str) -> list[str]:
    """The text with every name replaced by its order of first appearance."""
    names: dict[str, str] = {}

    def sub(m: re.Match[str]) -> str:
        k = m.group(0).lstrip("%")
        return names.setdefault(k, f"n{len(names)}")

    return [NAME.sub(sub, line) for line in text.splitlines()]


def diff(a: Path, b: Path) -> bool:
    ok = True
    for fa in sorted(a.glob("*.hlo")):
        fb = b / fa.name
        if not fb.exists():
            print("MISSING       ", fa.name)
            ok = False
            continue
        ta, tb = fa.read_text(), fb.read_text()
        if ta == tb:
            print("identical     ", fa.name)
        elif canon(ta) == canon(tb):
            print("renamed-equal ", fa.name)
        else:
            print("DIFFERENT     ", fa.name)
            ok = False
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("save", help="run the pipeline, save outputs and CPU times")
    s.add_argument("out", type=Path)
    s.add_argument("--only", default="", help="only modules whose name contains this")
    d = sub.add_parser("diff", help="compare two saved sets")
    d.add_argument("a", type=Path)
    d.add_argument("b", type=Path)
    args = ap.parse_args()
    if args.cmd == "save":
        save(args.out, args.only)
        return 0
    return 0 if diff(args.a, args.b) else 1


if __name__ == "__main__":
    raise SystemExit(main())
