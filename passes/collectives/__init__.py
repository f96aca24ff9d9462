"""XLA's collective passes (combiners, folders, decomposers, reassociation, creators), one
module per pass or per family of passes, each registered in `hlopass.pipeline`."""
