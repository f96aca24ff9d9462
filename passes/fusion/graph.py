"""The fusion plan of one computation: every instruction starts as its own `Kernel`;
fusing a producer kernel into a consumer kernel adds the producer's instructions to the
consumer (a copy when the producer still feeds other kernels). Plans are priced with the
cost model on the original instructions; the rewrites build the fusions afterwards.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

from hlopass.dialects.hlo import ComputationOp, HloOp, ReturnOp
from hlopass.kernel_structure.plan import Kernel


class FusionGraph:
    """Kernels of one computation and who reads whom."""

    def __init__(self, comp: ComputationOp):
        self.comp = comp
        self.ops: list[HloOp] = list(comp.instructions)
        self.position: dict[int, int] = {id(op): i for i, op in enumerate(self.ops)}
        self.kernel: dict[int, Kernel] = {id(op): Kernel.of(op, self.position) for op in self.ops}
        """The kernel rooted at each instruction (dead once fused into all its readers)."""
        self.containing: dict[int, list[Kernel]] = {
            id(op): [self.kernel[id(op)]] for op in self.ops
        }
        """Live kernels holding each instruction."""
        self.root = comp.root

    def copy(self) -> FusionGraph:
        """The same plan with kernels of its own: planning on the copy leaves this one as it
        is (a search replays many plans from one seeded graph)."""
        twin = copy.copy(self)  # the instructions and their positions are shared: never changed
        copies = {id(k): k.copy() for k in self.kernel.values()}  # every kernel is rooted here
        twin.kernel = {key: copies[id(k)] for key, k in self.kernel.items()}
        twin.containing = {
            key: [copies[id(k)] for k in lst] for key, lst in self.containing.items()
        }
        return twin

    def is_root(self, op: HloOp) -> bool:
        return op is self.root or any(isinstance(u.operation, ReturnOp) for u in op.result.uses)

    def consumers(self, k: Kernel) -> list[Kernel]:
        """Live kernels that read `k`'s output (they use it but do not compute it), in block
        order."""
        out: list[Kernel] = []
        seen: set[int] = set()
        root_id = id(k.root)
        for use in k.root.result.uses:
            user = use.operation
            for c in self.containing.get(id(user), ()):
                if c.alive and root_id not in c.ids and id(c) not in seen:
                    seen.add(id(c))
                    out.append(c)
        if len(out) > 1:
            pos = self.position
            out.sort(key=lambda c: pos[id(c.root)])
        return out

    def producers(self, k: Kernel) -> Iterator[Kernel]:
        """Live kernels whose outputs `k` reads."""
        seen: set[int] = set()
        for v in k.inputs():
            p = self.kernel.get(id(v.owner))
            if p is not None and p.alive and id(p) not in seen:
                seen.add(id(p))
                yield p

    def fuse(self, producer: Kernel, consumer: Kernel) -> None:
        """Add `producer`'s instructions to `consumer`."""
        new = [m for m in producer.members if id(m) not in consumer.ids]
        consumer.absorb(producer)
        for m in new:
            self.containing[id(m)].append(consumer)

    def kill(self, k: Kernel) -> None:
        """`k` is no longer a kernel of its own (every reader computes it)."""
        k.alive = False
        for m in k.members:
            lst = self.containing[id(m)]
            if k in lst:
                lst.remove(k)

    def live_fusions(self) -> list[Kernel]:
        """Kernels of more than one instruction, in block order of their roots."""
        out = [k for k in self.kernel.values() if k.alive and len(k.members) > 1]
        out.sort(key=lambda k: self.position[id(k.root)])
        return out
