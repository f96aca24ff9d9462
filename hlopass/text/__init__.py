"""HLO text in and out: lexer, the three parser layers, importer, exporter, StableHLO and xDSL text, the grammar page."""
