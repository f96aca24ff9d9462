"""Passes over the hlo dialect (installed as `hlopass.passes`), one module per pass."""
