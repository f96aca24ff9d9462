"""`collective-pipeliner` (XLA's `CollectivePipeliner`): see `pass_`."""

from .pass_ import CollectivePipelinerPass

__all__ = ["CollectivePipelinerPass"]
