"""Modules and a runner shared by the tests that compare a pass pipeline's output with and
without some shortcut of its own (a prefilter, an index): the corpus's seed modules and
JAX programs before XLA's optimizations, and the text a spec makes of a module."""

from __future__ import annotations

from hlopass.checking.corpus import corpus_root, modules
from hlopass.pipeline import run_pipeline
from hlopass.text.exporter import print_hlo
from hlopass.text.importer import parse_hlo


def source_modules() -> list[tuple[str, str]]:
    """(id, text) of the seeds and the JAX programs' pre-optimization HLO; none without
    the corpus (the callers add cases of their own)."""
    corpus = corpus_root()
    if corpus is None:
        return []
    return [(m.id, m.text) for m in modules(corpus, ("seeds", "jax"))
            if m.id.startswith("seeds/") or m.path.name == "before_optimizations.hlo"]  # fmt: skip


def pipeline_text(text: str, name: str, spec: str) -> str:
    """`text` parsed, run through the pipeline `spec`, printed."""
    module = parse_hlo(text, name)
    run_pipeline(module, spec)
    return print_hlo(module)
