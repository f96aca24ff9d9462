"""Is a result right: the verifier, equivalence checks, derived error bounds, the fuzzer, the corpus, lit and FileCheck support."""
