"""The command line: hlopass-opt and hlopass, failure handling, output files, statistics, generated docs, the xdsl-opt universe."""
