"""The hlo dialect: ops, types, attributes and traits (installed as `hlopass.dialects`)."""
