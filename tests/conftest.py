"""Shared fixtures: the corpus and the XLA oracle, each skipping with a reason when absent."""

from __future__ import annotations

import signal

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


def sigint_default() -> None:
    """`preexec_fn` for a child a test interrupts: a shell starts background jobs (`nohup
    ... &`, some CI runners) with SIGINT ignored and a child inherits that, where a user's
    Ctrl-C reaches a foreground process with SIGINT at its default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
