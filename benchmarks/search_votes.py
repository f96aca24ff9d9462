"""A pipeline plan's two votes against greedy's (issue 36): the estimate (`default`) and
the roofline vote (`roofline_row_us`) of the given decisions and of the greedy pipeline,
priced as `PipelineSpace` prices a plan, no search. Re-checks a table's pipeline win after
a change to how either vote prices kernels.

Usage: python benchmarks/search_votes.py PROGRAM 'DECISION;DECISION...'
       (PROGRAM: a corpus JAX program or seeds/000, seeds/001)
"""

from __future__ import annotations

import sys
from pathlib import Path

import hlopass
from hlopass.checking.corpus import corpus_root
from hlopass.search.pipeline_space import PipelineSpace

sys.path.insert(0, str(Path(__file__).parent))
from search import JAX_PIPELINE, SEED_PIPELINE  # noqa: E402


def main(argv: list[str]) -> int:
    root = corpus_root()
    if root is None or len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    name, decisions = argv[0], frozenset(d for d in argv[1].split(";") if d)
    if name.startswith("seeds/"):
        path, pipeline = next((root / "seeds").glob(f"{name[6:]}*.hlo")), SEED_PIPELINE
    else:
        path, pipeline = root / "jax" / name / "before_optimizations.hlo", JAX_PIPELINE
    space = PipelineSpace(hlopass.parse_hlo(path.read_text()), "h100_sxm", pipeline=pipeline)
    for d in (frozenset(), decisions):
        p = space.price(d)
        votes = ", ".join(f"{m} {t:.2f}" for m, t in p.by_model.items())
        print(f"{name} {'; '.join(sorted(d)) or 'greedy'}: {votes}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
