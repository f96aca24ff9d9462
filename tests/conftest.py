"""Shared fixtures: the corpus and the XLA oracle, each skipping with a reason when absent."""

from __future__ import annotations

import pytest

from hlopass.checking.corpus import corpus_root
from hlopass.execution import oracle

CORPUS = corpus_root()
CORPUS_MISSING = "the HLO corpus (../shared/corpus or $HLOPASS_CORPUS) is not present"
ORACLE_MISSING = "jax/jaxlib (the XLA oracle, `test` extra) is not installed"


@pytest.fixture(scope="session")
def corpus():
    if CORPUS is None:
        pytest.skip(CORPUS_MISSING)
    return CORPUS


@pytest.fixture(scope="session")
def xla():
    if not oracle.available():
        pytest.skip(ORACLE_MISSING)
    return oracle
